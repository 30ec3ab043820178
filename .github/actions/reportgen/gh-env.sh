# shellcheck shell=bash
# Sourced by the action's scripts: point `gh` at the server this workflow runs on
# (github.com, or a GitHub Enterprise Server, which gh reads its token for from
# GH_ENTERPRISE_TOKEN) and check that it has a token.
GH_HOST="${GITHUB_SERVER_URL:-https://github.com}"
GH_HOST="${GH_HOST#*://}"
export GH_HOST="${GH_HOST%/}"
if [ "$GH_HOST" != github.com ]; then
  export GH_ENTERPRISE_TOKEN="${GH_ENTERPRISE_TOKEN:-${GH_TOKEN:-}}"
fi
if [ -z "${GH_TOKEN:-}${GH_ENTERPRISE_TOKEN:-}" ]; then
  echo "::error title=reportgen::no GitHub token: give the action github-token (default: github.token)" >&2
  exit 1
fi
