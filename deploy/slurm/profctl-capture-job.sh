#!/bin/bash
# Captures every node of a running SLURM job whose nodes run profctl-agent (as the systemd
# service of deploy/systemd, or started by profctl-job.sbatch).
#
#   deploy/slurm/profctl-capture-job.sh JOBID [profctl capture flags...]
#   deploy/slurm/profctl-capture-job.sh 4242 --duration=5000 --token-file=$HOME/.profctl/token
#
# Environment: PROFCTL (the profctl binary, default profctl from PATH), PROFCTL_PORT (6000),
# PROFCTL_LOGDIR (./profctl-logs). The session is named slurm-<JOBID>_<UTC time>.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 JOBID [profctl capture flags...]" >&2
  exit 2
fi
job=$1
shift
PROFCTL=${PROFCTL:-profctl}
PROFCTL_PORT=${PROFCTL_PORT:-6000}
PROFCTL_LOGDIR=${PROFCTL_LOGDIR:-$PWD/profctl-logs}

state=$(scontrol show job "$job" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | sed -n 1p)
if [ "$state" != "RUNNING" ]; then
  echo "$0: job $job is ${state:-unknown}, not RUNNING" >&2
  exit 2
fi
# The job's node list (NodeList=node[01-04],gpu7), expanded one host a line.
nodelist=$(scontrol show job "$job" | sed -n 's/^ *NodeList=\([^ ]*\).*/\1/p' | sed -n 1p)
# One worker a line in a file (--workers=@FILE): a job of thousands of nodes is longer than one
# command-line argument may be (128 KiB on Linux).
workers=$(mktemp "${TMPDIR:-/tmp}/profctl-workers.XXXXXX")
trap 'rm -f "$workers"' EXIT
scontrol show hostnames "$nodelist" | sed "s/\$/:$PROFCTL_PORT/" > "$workers"
echo "capturing job $job on $(wc -l < "$workers") nodes: $(head -c 2000 "$workers" | paste -sd, -)" >&2
rc=0
"$PROFCTL" capture --workers=@"$workers" --logdir="$PROFCTL_LOGDIR" \
  --session="slurm-${job}_$(date -u +%Y%m%dT%H%M%SZ)" "$@" || rc=$?
exit $rc
