#!/bin/sh
# carbonsched demo job: a small real payload shipped with carbonsched (POSIX sh; GNU or busybox).
# It works in 10 s steps until 60 s before CARBONSCHED_PIECE_END, counting its steps in a
# checkpoint file. On SIGUSR1 (Slurm, before a pausing piece's time limit) or SIGTERM
# (Kubernetes) it writes the checkpoint and exits 0; a resumed piece (CARBONSCHED_RESUME=1)
# continues from the step the previous piece saved. CARBONSCHED_DEMO_DIR: where the checkpoint
# lives (default /tmp, i.e. per node: give a shared folder to resume across nodes).
ckpt="${CARBONSCHED_DEMO_DIR:-/tmp}/carbonsched-demo-${CARBONSCHED_JOB_ID:-job}.step"
step=0
if [ "${CARBONSCHED_RESUME:-0}" = 1 ] && [ -r "$ckpt" ]; then step=$(cat "$ckpt"); fi
save() {
  echo "$step" > "$ckpt"
  echo "piece ${CARBONSCHED_PIECE:-0}: checkpoint at step $step"
  exit 0
}
trap save USR1 TERM
end=$(date -u -d "$(echo "${CARBONSCHED_PIECE_END:-}" | tr T ' ' | tr -d Z)" +%s 2>/dev/null)
[ -n "$end" ] || end=$(($(date -u +%s) + 120))
echo "piece ${CARBONSCHED_PIECE:-0} of ${CARBONSCHED_PIECES:-1} of ${CARBONSCHED_JOB_ID:-job}:" \
  "from step $step until ${CARBONSCHED_PIECE_END:-(no end given)}"
while [ "$(date -u +%s)" -lt $((end - 60)) ]; do
  step=$((step + 1))
  sleep 10 &
  wait $!
done
save
