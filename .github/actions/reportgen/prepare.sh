#!/usr/bin/env bash
# prepare.sh: lay out the logdir that the action builds: the capture of this run
# (LOGDIR) and the baseline's (BASELINE_LOGDIR, or the capture artifact of the
# newest push to BASELINE_BRANCH), each copied as one run named for readers
# (pr-<number> or the branch; the base branch). Writes the step's outputs.
set -euo pipefail

: "${LOGDIR:?the action needs a logdir}" "${NAME:?}" "${RUNNER_TEMP:?}" "${GITHUB_OUTPUT:?}"
PYTHON="${PYTHON:-python3}"
work="$RUNNER_TEMP/reportgen-$NAME"
logdir="$work/logdir"
rm -rf "$work"
mkdir -p "$logdir/plugins/profile" "$work/reports" "$work/comment"

# A run name made of letters, digits, '.', '_' and '-' (branch names hold '/').
run_name() {
  local name
  name="$(printf '%s' "$1" | tr -c 'A-Za-z0-9._-' '-')"
  printf '%s\n' "${name:-run}"
}

# The run folder of a logdir, of its plugins/profile folder, or a run folder
# itself, into $run_dir; of several runs, the newest by name (profilers name
# runs by time). Names are NUL-separated and kept in a variable, not printed:
# a folder name may hold a newline.
newest_run() {
  local dir="$1" newest=""
  if [ ! -d "$dir" ]; then
    echo "::error title=reportgen::$dir: no such folder (give the capture's logdir)" >&2
    return 1
  fi
  [ -d "$dir/plugins/profile" ] && dir="$dir/plugins/profile"
  IFS= read -r -d '' newest < <(find "$dir" -mindepth 1 -maxdepth 1 -type d -printf '%f\0' \
    | LC_ALL=C sort -z | tail -z -n 1) || true
  if [ -n "$newest" ]; then run_dir="$dir/$newest"; else run_dir="$dir"; fi
}

# The capture artifact of the newest push to branch $1 that still has one,
# unpacked into folder $2. Pushes only: a pull request from a fork can run on
# a branch of the same name, and its capture must never become the baseline.
fetch_baseline() {
  local branch="$1" dest="$2" workflow runs run_id artifact
  # shellcheck source=gh-env.sh
  source "$GITHUB_ACTION_PATH/gh-env.sh"
  workflow="${BASELINE_WORKFLOW:-${GITHUB_WORKFLOW_REF%@*}}"
  workflow="${workflow##*/}"
  branch="$("$PYTHON" -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$branch")"
  runs="$(gh api "repos/$GITHUB_REPOSITORY/actions/workflows/$workflow/runs?branch=$branch&event=push&status=completed&per_page=20" \
    --jq '.workflow_runs[].id')"
  for run_id in $runs; do
    artifact="$(gh api "repos/$GITHUB_REPOSITORY/actions/runs/$run_id/artifacts?name=$NAME-capture" \
      --jq '[.artifacts[] | select(.expired | not)][0].id // empty')"
    if [ -n "$artifact" ]; then
      gh api "repos/$GITHUB_REPOSITORY/actions/artifacts/$artifact/zip" > "$work/baseline.zip"
      mkdir -p "$dest"
      "$PYTHON" -m zipfile -e "$work/baseline.zip" "$dest"
      rm -f "$work/baseline.zip"
      echo "reportgen: baseline: artifact $NAME-capture of run $run_id ($GITHUB_SERVER_URL/$GITHUB_REPOSITORY/actions/runs/$run_id)"
      return 0
    fi
  done
  echo "::notice title=reportgen::no $NAME-capture artifact on the last pushes to $1 (workflow $workflow): nothing to compare with; it appears once $1 has run this workflow"
  return 1
}

newest_run "$LOGDIR"
candidate_run="$run_dir"
if [ -n "${PR_NUMBER:-}" ]; then
  candidate="$(run_name "${CANDIDATE_NAME:-pr-$PR_NUMBER}")"
else
  candidate="$(run_name "${CANDIDATE_NAME:-${GITHUB_REF_NAME:-candidate}}")"
fi
mkdir -p "$logdir/plugins/profile/$candidate"
cp -R "$candidate_run/." "$logdir/plugins/profile/$candidate/"

baseline=""
baseline_run=""
if [ -n "${BASELINE_LOGDIR:-}" ]; then
  newest_run "$BASELINE_LOGDIR"
  baseline_run="$run_dir"
elif [ -n "${BASELINE_BRANCH:-}" ] && fetch_baseline "$BASELINE_BRANCH" "$work/baseline"; then
  newest_run "$work/baseline"
  baseline_run="$run_dir"
fi
if [ -n "$baseline_run" ]; then
  baseline="$(run_name "${BASELINE_NAME:-${BASELINE_BRANCH:-baseline}}")"
  [ "$baseline" = "$candidate" ] && baseline="$baseline-base"
  mkdir -p "$logdir/plugins/profile/$baseline"
  cp -R "$baseline_run/." "$logdir/plugins/profile/$baseline/"
fi

# The budgets, one argument a line, for the check and the summary. Without a
# baseline run there is no regression to measure: that budget is turned off.
: > "$work/budget.args"
budget_arg() { [ -z "$2" ] || printf '%s\n%s\n' "$1" "$2" >> "$work/budget.args"; }
budget_arg --budget "${BUDGET:-}"
budget_arg --max-step-ms "${MAX_STEP_MS:-}"
budget_arg --max-input-percent "${MAX_INPUT_PERCENT:-}"
budget_arg --max-regression "${MAX_REGRESSION:-}"
has_budget=false
[ -s "$work/budget.args" ] && has_budget=true
if [ -n "$baseline" ]; then
  budget_arg --baseline "$baseline"
else
  budget_arg --max-regression off
fi

# Publishing needs credentials, which a pull request from a fork is not given.
publish=false
if [ -n "${GCS_DESTINATION:-}" ]; then
  if [ -z "${PR_NUMBER:-}" ] || [ "${HEAD_REPO:-}" = "${GITHUB_REPOSITORY:-}" ]; then
    publish=true
  else
    echo "::notice title=reportgen::pull request from ${HEAD_REPO:-a deleted fork}: no credentials, the site is not published"
  fi
fi

{
  echo "work=$work"
  echo "logdir=$logdir"
  echo "site=$work/site"
  echo "candidate=$candidate"
  echo "candidate-run=$logdir/plugins/profile/$candidate"
  echo "baseline=$baseline"
  echo "has-budget=$has_budget"
  echo "publish=$publish"
} >> "$GITHUB_OUTPUT"
# Folder names as bash quotes them: a newline in one must not start a line (a workflow command).
printf 'reportgen: %s ← %q%s\n' "$candidate" "$candidate_run" "${baseline:+; $baseline ← $(printf '%q' "$baseline_run")}"
