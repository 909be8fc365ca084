#!/usr/bin/env bash
# Long-sequence training (issue 5, part 3): T = 64 attention windows, beyond exact enumeration, 150 steps at batch 32
# (the ablation's other settings: 1 layer, 1 head, n_embd 64, lr 3e-3; sized to finish in a session on a shared 2-core
# machine). Regenerate from the repository root:
#     nice -n 5 bash experiments/long_sequence/run.sh && python -m experiments.long_sequence.summarize
# Default (SAMPLER=meanfield): softmax, hj and h, seeds 0 and 1, hj/h trained and evaluated with the mean-field sampler;
# runs go to results/long_sequence/runs/<task>_<mode>_T64_s<seed>/.
# SAMPLER=gibbs: hj (MODES to change) trained and evaluated with short-burn-in Gibbs chains (settings below, measured
# against exact enumeration and a long-chain reference by gibbs_accuracy.py); runs go to
# results/long_sequence/runs/<task>_<mode>_T64_gibbs_s<seed>/, e.g.
#     SAMPLER=gibbs TASKS=brackets nice -n 5 bash experiments/long_sequence/run.sh
# Existing runs are resumed (checkpoint) or skipped (finished).
set -euo pipefail
OUT=results/long_sequence/runs
DATA=${HYBRID_ATTENTION_DATA:-data/tinyshakespeare.txt}  # else the repository default (experiments.data_path)
T=${T:-64}
STEPS=${STEPS:-150}
BATCH=${BATCH:-32}
SEEDS=${SEEDS:-"0 1"}
TASKS=${TASKS:-"brackets shakespeare"}
SAMPLER=${SAMPLER:-meanfield}
# Gibbs: 128 reads per problem from 16 chains x 8 records (thinning 1) after 32 burn-in sweeps (the first 16 a warm-up
# from beta = 0); an evaluation costs ~63 training forwards, so evaluate (and checkpoint) every 75 steps only
GIBBS_SHOTS=${GIBBS_SHOTS:-128}
GIBBS_OPTIONS=${GIBBS_OPTIONS:-"burn_in=32 num_chains=16 thinning=1"}
case "$SAMPLER" in
  meanfield) MODES=${MODES:-"softmax hj h"}; SUFFIX=""; EVAL=${EVAL:-50} ;;
  gibbs) MODES=${MODES:-"hj"}; SUFFIX="_gibbs"; EVAL=${EVAL:-75} ;;
  *) echo "SAMPLER must be meanfield or gibbs, got $SAMPLER" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
for seed in $SEEDS; do
  for task in $TASKS; do
    for mode in $MODES; do
      if [ "$mode" = softmax ]; then dir="$OUT/${task}_${mode}_T${T}_s${seed}"; else dir="$OUT/${task}_${mode}_T${T}${SUFFIX}_s${seed}"; fi
      if [ -f "$dir/metrics.json" ] && grep -q '"finished": true' "$dir/metrics.json"; then continue; fi
      extra=()
      if [ "$mode" != softmax ]; then
        extra+=(--sampler "$SAMPLER")
        if [ "$SAMPLER" = gibbs ]; then
          extra+=(--shots "$GIBBS_SHOTS")
          for opt in $GIBBS_OPTIONS; do extra+=(--sampler-option "$opt"); done
        fi
      fi
      [ "$task" = shakespeare ] && extra+=(--data "$DATA")
      [ -f "$dir/checkpoint.pt" ] && extra+=(--resume)
      hybrid-attention train --task "$task" --attention "$mode" --block-size "$T" --steps "$STEPS" --seed "$seed" \
        --batch-size "$BATCH" --eval-interval "$EVAL" --threads 1 --no-progress --out "$dir" "${extra[@]}"
    done
  done
done
