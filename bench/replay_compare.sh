#!/bin/sh
# Replay recorded logs with several tracker settings into OUTDIR (logs, summaries, phase databases,
# stdout, stderr), so that two trees' outputs can be compared byte for byte (issue 30: behaviour
# unchanged by the refactoring). Usage: bench/replay_compare.sh OUTDIR LOG...
# Compare: diff -r OUTDIR_BEFORE OUTDIR_AFTER (the summary's timing fields are removed first).
set -u
out=$1; shift
mkdir -p "$out"
logs=$(for log in "$@"; do realpath "$log"; done)
cd "$out" || exit 2
out=.
for log in $logs; do
  name=$(basename "$log" .jsonl)
  i=0
  for setting in "" "--threshold 0.05" "--tracker stable" "--test multinomial" "--segment-mode variable" \
                 "--segment-mode qphase" "--interval 3000000" "--phase-db PHASEDB"; do
    i=$((i + 1))
    tag="$name.$i"
    rm -f "$tag.db.json"
    args=$(echo "$setting" | sed "s#PHASEDB#$tag.db.json#")
    # shellcheck disable=SC2086
    phasescope replay "$log" $args --log "$tag.log" --summary "$tag.sum.json" > "$tag.stdout" 2> "$tag.stderr"
    echo "$?" > "$tag.rc"
    if [ -n "$args" ] && [ "${args#--phase-db}" != "$args" ]; then  # a second run loads the first's database
      phasescope replay "$log" $args --log "$tag.2.log" --summary "$tag.2.sum.json" > "$tag.2.stdout" 2> "$tag.2.stderr"
      echo "$?" > "$tag.2.rc"
    fi
  done
done
# timing fields differ run to run: keep a copy of each summary without them
for s in "$out"/*.sum.json; do
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
def strip(o):
    if isinstance(o, dict):
        return {k: strip(v) for k, v in o.items() if k not in ("elapsed_s", "started", "saved", "wall_s", "seconds")}
    if isinstance(o, list):
        return [strip(v) for v in o]
    return o
json.dump(strip(d), open(sys.argv[1] + ".cmp", "w"), indent=1, sort_keys=True)' "$s"
done
