#!/bin/bash
# paired A/B: for each job, arm A (default) and arm B (CARBONSCHED_CG_REPACK_MORE=3) start together,
# after the machine's runnable count (other sessions) has been low for a few seconds
source /work/diag/s75/wtpkg.sh /work/wt04
cd /work/wt04
export OMP_NUM_THREADS=1 CARBONSCHED_SHARED_DATA=/work/shared/data
OUT=bench/results/matrix_2026-12-07_repack_more
wait_quiet() {
  local t0=$(date +%s) ok=0
  while :; do
    # runnable tasks now, less this reader: quiet when <= 1 over 5 samples in a row
    r=$(awk '{split($4,a,"/"); print a[1]-1}' /proc/loadavg)
    if [ "$r" -le 1 ]; then ok=$((ok+1)); else ok=0; fi
    [ $ok -ge 5 ] && break
    [ $(( $(date +%s) - t0 )) -ge ${MAXWAIT:-240} ] && { echo "waited too long, running anyway"; break; }
    sleep 1
  done
}
run_pair() {  # hours seed name
  wait_quiet
  echo "$(date -u +%FT%TZ) start $3 $(cat /proc/loadavg)"
  ( unset CARBONSCHED_CG_REPACK_MORE; python bench/plan_matrix.py --cells 10000:0.8 --hours $1 --limit 60 --reference-seeds --seeds $2 --out $OUT/A_$3.json > $OUT/A_$3.log 2>&1 ) &
  ( export CARBONSCHED_CG_REPACK_MORE=3; python bench/plan_matrix.py --cells 10000:0.8 --hours $1 --limit 60 --reference-seeds --seeds $2 --out $OUT/B_$3.json > $OUT/B_$3.log 2>&1 ) &
  wait
}
for rep in 1 2 3; do for s in 3 4; do run_pair 72 $s 72h08_s${s}_r${rep}; done; done
for s in 0 1 2; do run_pair 72 $s 72h08_s${s}_r1; done
for s in 0 1 2 3 4; do run_pair 48 $s 48h08_s${s}; done
echo "$(date -u +%FT%TZ) all done"
