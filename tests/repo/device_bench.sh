#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU check's bench phase (tests/device/run.sh --only bench) rehearsed without a GPU, with a
# stand-in dltrain and a stand-in PyTorch (DLT_TORCH_PYTHON) that print the rows the real ones
# print, so that its wiring is not first tried on a lent machine: every plain and feed row gets both
# peers, eager and the strongest (--peer strong --self-check), --feed handed to both; the table has
# both ratios and the fp16 over strict-fp32 line; the verdicts: fp16 against eager, fp16 and bf16
# against the strongest (the goal 1.2 said met or not), the fed row NOT TESTED without photos; a
# strongest peer whose self-check fails is a FAIL and its figures are left out; a strongest-peer
# ratio under DLT_BENCH_STRONG_MIN_RATIO fails.
. "$(dirname "$0")/../slurm/lib.sh"
RUN=$DLT_SRCDIR/tests/device/run.sh
command -v python3 >/dev/null || skip_all "python3 missing"
tap_plan 5
rm -rf "$WORK"; mkdir -p "$WORK/bin" "$WORK/pack/bin"
cat >"$WORK/bin/nvidia-smi" <<'SH'
#!/bin/bash
case "$*" in
  -L) echo "GPU 0: Stand-in H100 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "Stand-in H100, 81559 MiB, 999.99" ;;
esac
SH
# dltrain bench: images/s by precision and variant, a profile with --profile; the calls logged.
cat >"$WORK/pack/bin/dltrain" <<'SH'
#!/bin/bash
echo "dltrain $*" >>"$FAKE_LOG"
prec= v=plain
while [ $# -gt 0 ]; do
  case $1 in --precision) prec=$2; shift ;; --feed) v=feed ;; --data) v=data; shift ;; --profile) v=profile ;; --cuda-graphs) v=graphs ;; --wgrad-fp32) [ "$2" = off ] && v=nowgrad; shift ;; --fuse-bn) [ "$2" = on ] && v=fused; shift ;; esac
  shift
done
case $prec:$v in fp16:plain | fp16:profile) ips=7200 ;; fp16:data) ips=6950 ;; fp16:feed) ips=7100 ;; fp16:graphs) ips=7290 ;; fp16:nowgrad) ips=7150 ;; fp16:fused) ips=7500 ;;
  bf16:*) ips=6600 ;; tf32:*) ips=3150 ;; fp32:*) ips=1300 ;; esac
[ "$prec:$v" = fp16:plain ] && echo "dltrain: filter gradients: 14 of 20 convolution geometries written in fp32 by cuDNN's graph API, the rest in fp16 and cast (--wgrad-fp32 auto: the faster of the two, timed at planning)" >&2
prof=
[ "$v" = profile ] && prof=',"profile":{"steps":60,"step_ms":35.6,"classes":{"conv_fwd":{"ms":9.1,"share":0.256,"calls":53},"other":{"ms":1.2,"share":0.034}}}'
echo '{"precision":"'"$prec"'","batch":256,"images_per_s":'"$ips"'.0'"$prof"'}'
SH
# The stand-in PyTorch: "python tests/device/torch_bench.py --peer K --precision P ... [--feed] [--self-check]".
cat >"$WORK/bin/fakepy" <<'SH'
#!/bin/bash
echo "python $*" >>"$FAKE_LOG"
peer=eager prec= feed=false sc=0
while [ $# -gt 0 ]; do
  case $1 in --peer) peer=$2; shift ;; --precision) prec=$2; shift ;; --feed) feed=true ;; --self-check) sc=1 ;; esac
  shift
done
if [ "$peer" = strong ] && [ "${FAKE_STRONG_BAD:-0}" = 1 ]; then
  echo '{"error": "the strong step does not train like the eager one", "self_check": {"relative_difference": 1.0}}'; exit 1
fi
case $peer:$prec in eager:fp16) ips=5850 ;; strong:fp16) ips=6500 ;; eager:bf16) ips=4650 ;; strong:bf16) ips=5200 ;;
  eager:tf32) ips=2900 ;; strong:tf32) ips=3000 ;; eager:fp32) ips=1150 ;; strong:fp32) ips=1200 ;; esac
echo '{"framework":"pytorch-stand-in","precision":"'"$prec"'","peer":"'"$peer"'","feed":'"$feed"',"self_check":'"$([ $sc = 1 ] && echo '{"pass":true}' || echo null)"',"images_per_s":'"$ips"'.0}'
SH
chmod +x "$WORK/bin/"* "$WORK/pack/bin/dltrain"
# rehearse NAME [VAR=VALUE...]: run.sh --only bench with the stand-ins; the calls in $WORK/NAME.calls.
rehearse() {
  local name=$1; shift
  : >"$WORK/$name.calls"
  (cd "$DLT_SRCDIR" && env "$@" PATH="$WORK/bin:$PATH" DLT_PACK="$WORK/pack" OUT="$WORK/$name" FAKE_LOG="$WORK/$name.calls" \
    DLT_TORCH_PYTHON="$WORK/bin/fakepy" DLT_DEVICE_DEADLINE=120 timeout 150 bash "$RUN" --only bench 2>&1)
}
out=$(rehearse good); rc=$?
calls=$(cat "$WORK/good.calls")
n_eager=$(grep -c -- '--peer eager' <<<"$calls"); n_strong=$(grep -c -- '--peer strong.*--self-check' <<<"$calls")
n_ours=$(grep -c '^dltrain bench' <<<"$calls")
if ((rc == 2 && n_ours == 9 && n_eager == 5 && n_strong == 5)) &&
   grep -q -- '--precision fp16 .*--wgrad-fp32 off' <<<"$calls" &&
   [ "$(grep '^dltrain bench' <<<"$calls" | sed -n 2p | grep -c -- '--precision fp16 .*--fuse-bn on')" = 1 ] &&
   grep -q -- '--peer strong --precision fp16 --batch 256 --warmup 30 --iters 60 --feed --self-check' <<<"$calls" &&
   grep -q -- '--peer eager --precision fp16 --batch 256 --warmup 30 --iters 60 --feed$' <<<"$calls" &&
   grep -q -- '--precision fp32 .*--cudnn-cache' <<<"$calls"; then
  ok "9 dltrain rows (no photos: the fed row left out; --fuse-bn on second, --wgrad-fp32 off last), each plain and feed row with both peers, --feed to both, strong with --self-check"
else not_ok "the bench calls (rc=$rc; dltrain $n_ours, eager $n_eager, strong $n_strong)"; echo "$calls" | diag; echo "$out" | tail -30 | diag; fi
if [[ $out == *"fp16      256 plain       7200.0        5850.0   1.23x        6500.0   1.11x"* &&
      $out == *"bf16      256 plain       6600.0        4650.0   1.42x        5200.0   1.27x"* &&
      $out == *"fp16      256 graphs      7290.0        5850.0   1.25x        6500.0   1.12x"* &&
      $out == *"fp16 over strict fp32, dltrain: 5.54x"* && $out == *"fp16 over strict fp32, PyTorch strongest: 5.42x"* &&
      $out == *"fp16      256 nowgrad     7150.0        5850.0   1.22x"* &&
      $out == *"fp16      256 fused       7500.0        5850.0   1.28x"* && $out == *"fp16 --fuse-bn on over the fp16 row: 1.042x"* &&
      $out == *"device: bench: dltrain: filter gradients: 14 of 20 convolution geometries written in fp32"* &&
      $out == *"device:   conv_fwd"*"9.100 ms"* ]]; then
  ok "the table: both peers' ratios per row, the graphs and nowgrad rows against the plain peers, fp16 over strict fp32, the profile, the filter-gradient choice"
else not_ok "the bench table"; echo "$out" | diag; fi
if [[ $out == *"ok   bench: dltrain fp16 7200.0 images/s vs PyTorch eager AMP channels_last 5850.0 images/s"*"ratio 1.23"* &&
      $out == *"ok   bench: dltrain fp16 7200.0 images/s vs the strongest PyTorch (fused SGD, whole-step CUDA graph) 6500.0: ratio 1.11 (pass at >= 1.00; the goal 1.20 not met)"* &&
      $out == *"ok   bench: dltrain bf16 6600.0 images/s vs the strongest PyTorch"*"ratio 1.27"*"the goal 1.20 met)"* &&
      $out == *"ok   bench: fp16 --fuse-bn on 7500.0 images/s against the fp16 row's 7200.0: 1.042 (pass at >= 1.00"*"met on an H100 only)"* &&
      $out == *"NOT TESTED bench: fp16 fed from JPEGs: not run (no photos, or no time left)"* ]]; then
  ok "verdicts: fp16 against eager (1.23), fp16 and bf16 against the strongest (1.11 goal not met, 1.27 met), the fed row not tested"
else not_ok "the bench verdicts"; echo "$out" | grep 'bench' | diag; fi
out=$(rehearse bad FAKE_STRONG_BAD=1); rc=$?
if ((rc == 1)) && [[ $out == *"FAIL bench: the strongest PyTorch peer failed its --self-check"* &&
      $out == *"NOT TESTED bench: fp16 against the strongest PyTorch: dltrain 7200.0, PyTorch None"* &&
      $out == *"ok   bench: dltrain fp16 7200.0 images/s vs PyTorch eager AMP"* ]]; then
  ok "a strongest peer that fails its self-check is a FAIL, its figures left out, the eager verdict kept"
else not_ok "a failing self-check (rc=$rc)"; echo "$out" | grep 'bench' | diag; fi
out=$(rehearse strict DLT_BENCH_STRONG_MIN_RATIO=1.2); rc=$?
if ((rc == 1)) && [[ $out == *"FAIL bench: dltrain fp16 7200.0 images/s vs the strongest PyTorch"*"ratio 1.11 (pass at >= 1.20"* &&
      $out == *"ok   bench: dltrain bf16 6600.0"* ]]; then
  ok "DLT_BENCH_STRONG_MIN_RATIO=1.2: fp16 at 1.11 fails, bf16 at 1.27 passes"
else not_ok "the strongest-peer bound (rc=$rc)"; echo "$out" | grep 'bench' | diag; fi
