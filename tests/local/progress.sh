#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Progress of long commands (common/progress.c): `dltrain data pack` and `dltrain eval`
# print plain lines now and then when their output is not a terminal (a Slurm output file), one
# line rewritten in place on a terminal (seen raw through script(1) and as the screen shows it
# through tmux), nothing under --quiet or for a command shorter than the interval.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
tap_plan 8
rm -rf "${WORK:?}"/*
"$MK" folder "$WORK/ds" 4 300 96 96 plain >/dev/null
# On a terminal a line every 0.5 s: --resize 320 makes the 1,200 images take a few seconds.
n=$(find "$WORK/ds/train" -name '*.JPEG' | wc -l)
LINE='^dltrain: packing [0-9]+/'$n' images \([0-9.]+%\), [0-9.]+ images/s, [0-9]+:[0-9]{2}:[0-9]{2} (left|elapsed)$'

out=$(DLT_PROGRESS_SECONDS=0.05 timeout 300 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/a.rec" --resize 64 2>&1); rc=$?
lines=$(grep -cE "$LINE" <<<"$out"); left=$(grep -c ' left$' <<<"$out")
counts=$(grep -oE 'packing [0-9]+' <<<"$out" | awk '{print $2}')
if ((rc == 0 && left >= 2 && lines == left + 1)) && [[ $out != *$'\r'* && $out != *$'\033'* ]] && sort -nc <<<"$counts" &&
   grep -qE "^dltrain: packing $n/$n images \(100\.0%\), .* elapsed$" <<<"$out" && [[ $(tail -1 <<<"$out") == "dltrain: packed $n images"* ]]; then
  ok "data pack, output not a terminal: $left plain progress lines, counts rising, then the final figures (no \\r, no escapes)"
else not_ok "data pack plain progress lines (rc=$rc, $lines lines)"; echo "$out" | tail -5 | cat -A | diag; fi

out=$(timeout 300 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/b.rec" 2>&1); rc=$?
out2=$(DLT_PROGRESS_SECONDS=0.05 timeout 300 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/c.rec" --resize 64 --quiet 2>&1); rc2=$?
if ((rc == 0 && rc2 == 0)) && [[ $out != *"dltrain: packing"* && $out2 != *"dltrain: packing"* && $out2 == "dltrain: packed $n images"* ]]; then
  ok "data pack shorter than the interval (default 60 s) prints no progress line; --quiet none at all"
else not_ok "short / quiet data pack (rc=$rc/$rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi

out=$(DLT_PROGRESS_SECONDS=soon timeout 300 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/d.rec" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"DLT_PROGRESS_SECONDS=soon is not a number of seconds"* ]]; then ok "a bad DLT_PROGRESS_SECONDS is said, not ignored"
else not_ok "bad DLT_PROGRESS_SECONDS (rc=$rc)"; echo "$out" | tail -3 | diag; fi

# On a terminal: script(1) gives the command a pseudo-terminal and records what it wrote.
if command -v script >/dev/null; then
  TERM=xterm timeout 300 script -q -e -c "'$DLTRAIN' data pack '$WORK/ds/train' '$WORK/e.rec' --resize 320" "$WORK/tty.raw" >/dev/null 2>&1; rc=$?
  redraws=$(grep -ao $'\rdltrain: packing' "$WORK/tty.raw" | wc -l)
  if ((rc == 0 && redraws >= 3)) && ! grep -aqE $'^dltrain: packing [0-9]+/[0-9]+ images[^\r]* left\r?$' "$WORK/tty.raw"; then
    ok "data pack on a terminal: one line redrawn in place (\\r, the line, clear to end of line) $redraws times, no line of its own per update"
  else not_ok "terminal progress (rc=$rc, $redraws redraws)"; tail -c 600 "$WORK/tty.raw" | cat -A | diag; fi
else ok "# SKIP script(1) missing (contrib/install-deps.sh installs bsdutils)"; fi

# What the screen shows: tmux runs the command in a pane; the progress is one line.
if command -v tmux >/dev/null; then
  sock=dlt-progress-$$
  tmux -L "$sock" -f /dev/null new-session -d -x 160 -y 30 \
    "'$DLTRAIN' data pack '$WORK/ds/train' '$WORK/f.rec' --resize 320; echo EXIT=\$?; sleep 120" 2>/dev/null
  for _ in $(seq 600); do
    screen=$(tmux -L "$sock" capture-pane -p 2>/dev/null)
    [[ $screen == *EXIT=* ]] && break
    sleep 0.2
  done
  tmux -L "$sock" kill-server 2>/dev/null
  rm -f "${TMUX_TMPDIR:-/tmp}/tmux-$(id -u)/$sock" # kill-server may leave its socket behind
  plines=$(grep -c 'dltrain: packing' <<<"$screen")
  if [[ $screen == *EXIT=0* && $plines == 1 ]] && grep -qE "^dltrain: packing $n/$n images \(100\.0%\), .* elapsed *$" <<<"$screen" &&
     grep -q "^dltrain: packed $n images" <<<"$screen"; then
    ok "tmux capture-pane: the progress is one screen line, left at the final figures, then the result"
  else not_ok "tmux screen ($plines progress lines)"; echo "$screen" | grep -v '^$' | tail -6 | diag; fi
else ok "# SKIP tmux missing (contrib/install-deps.sh installs it)"; fi

SMALL=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 20 --warmup-epochs 0 --workers 2)
timeout 300 "$DLTRAIN" train --synthetic "${SMALL[@]}" --synthetic-size 40 --steps 2 --eval-every 0 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
ck=$(ls "$WORK"/ck/ckpt-*.safetensors 2>/dev/null | grep -v state | tail -1)
ELINE='^dltrain: evaluating [0-9]+/6000 images \([0-9.]+%\), [0-9.]+ images/s, [0-9]+:[0-9]{2}:[0-9]{2} (left|elapsed)$'
out=$(DLT_PROGRESS_SECONDS=0.02 timeout 300 "$DLTRAIN" eval "${SMALL[@]}" --eval-size 6000 --checkpoint "$ck" 2>&1); rc=$?
lines=$(grep -cE "$ELINE" <<<"$out")
if ((rc == 0 && lines >= 2)) && grep -qE '^dltrain: evaluating 6000/6000 images \(100\.0%\).* elapsed$' <<<"$out" && [[ $(tail -1 <<<"$out") == *"6000 images, top-1"* ]]; then
  ok "eval, output not a terminal: plain progress lines ($lines), the final figures, then the result"
else not_ok "eval progress (rc=$rc, $lines lines)"; echo "$out" | tail -4 | diag; fi
out=$(DLT_PROGRESS_SECONDS=0.02 timeout 300 "$DLTRAIN" eval "${SMALL[@]}" --eval-size 6000 --checkpoint "$ck" --quiet 2>&1); rc=$?
if ((rc == 0)) && [[ $out != *"evaluating"* && $out == *"6000 images, top-1"* ]]; then ok "eval --quiet: no progress, the result only"
else not_ok "eval --quiet (rc=$rc)"; echo "$out" | tail -4 | diag; fi

out=$(DLT_PROGRESS_SECONDS=0.02 timeout 300 "$DLTRAIN" train --synthetic "${SMALL[@]}" --synthetic-size 40 --steps 2 --eval-every 1 --eval-size 3000 2>&1); rc=$?
if ((rc == 0)) && [[ $out != *"evaluating"* && $out == *"val top-1"* ]]; then ok "validation inside training prints no eval progress (its own line says the result)"
else not_ok "validation progress (rc=$rc)"; echo "$out" | tail -4 | diag; fi
