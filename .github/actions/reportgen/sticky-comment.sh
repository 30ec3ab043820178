#!/usr/bin/env bash
# sticky-comment.sh BODY_FILE PR_NUMBER: post BODY_FILE on pull request PR_NUMBER of
# $GITHUB_REPOSITORY as its sticky comment. The body's first line is the marker
# that `reportgen summary --sticky KEY` writes, <!-- reportgen:sticky:KEY -->; the
# comment whose body starts with that line and that this token's identity wrote is
# edited, and only when there is none is a comment posted, so a pull request keeps
# one comment per KEY however often it is pushed (anyone can write a comment that
# starts with the marker: only our own is ever edited). Needs GH_TOKEN with
# pull-requests: write. The identity: the login GET /user gives (a personal or
# user token); the workflow's GITHUB_TOKEN may not ask and comments as
# github-actions[bot] (REPORTGEN_COMMENT_AUTHOR names another app's bot).
set -euo pipefail

body_file="$1"
pr="$2"
repo="${GITHUB_REPOSITORY:?GITHUB_REPOSITORY is not set}"
# shellcheck source=gh-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/gh-env.sh"

marker="$(head -n 1 -- "$body_file")"
marker_pattern='^<!-- reportgen:sticky:[A-Za-z0-9._-]{1,64} -->$'
if ! [[ $marker =~ $marker_pattern ]]; then
  echo "::error title=reportgen::$body_file does not open with a sticky-comment marker (reportgen summary --sticky KEY): refusing to post a comment that the next push could not find" >&2
  exit 1
fi
if ! [[ $pr =~ ^[1-9][0-9]*$ ]]; then
  echo "::error title=reportgen::pull request number '$pr' is not a number" >&2
  exit 1
fi

if ! author="$(gh api user --jq .login 2>/dev/null)" || [ -z "$author" ]; then
  author="${REPORTGEN_COMMENT_AUTHOR:-github-actions[bot]}"
fi
author_pattern='^[A-Za-z0-9][A-Za-z0-9-]{0,38}(\[bot\])?$'
if ! [[ $author =~ $author_pattern ]]; then
  echo "::error title=reportgen::the token's login (or REPORTGEN_COMMENT_AUTHOR) is not a GitHub login: cannot tell our comment from others'" >&2
  exit 1
fi

# The oldest comment of ours that opens with the marker (neither the key nor a
# login allows a quote or backslash, so both are plain jq strings). --paginate
# runs the filter on each page: keep the first id printed.
ids="$(gh api --paginate "repos/$repo/issues/$pr/comments?per_page=100" \
  --jq "[.[] | select(.user.login == \"$author\" and (.body | startswith(\"$marker\")))][0].id // empty")"
id="${ids%%$'\n'*}"
if [ -n "$id" ]; then
  url="$(gh api --method PATCH "repos/$repo/issues/comments/$id" -F "body=@$body_file" --jq .html_url)"
  echo "reportgen: updated the pull request's comment $url"
else
  url="$(gh api --method POST "repos/$repo/issues/$pr/comments" -F "body=@$body_file" --jq .html_url)"
  echo "reportgen: posted the pull request's comment $url"
fi
