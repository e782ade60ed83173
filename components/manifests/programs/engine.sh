#!/bin/sh
# The engine container's entry (`components.manifests.pods`), from the group's programs ConfigMap:
#   engine.sh leader|worker CHECK_ARG... -- VLLM_ARG...
# It starts the container's liveness check (`liveness.py serve`, which the kubelet's httpGet
# probes ask), then becomes vLLM. CHECK_ARGs are key=value words without spaces.
set -euf
# Until `exec`, this shell is PID 1, which the kernel sends no signal it has no handler for: a
# rank stopped while it waits for its leader's name would wait out the whole grace period.
trap 'exit 143' TERM INT
role=$1
shift
checks=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    checks="$checks $1"
    shift
done
shift
if [ "$role" = leader ]; then
    # /tmp is the pod's emptyDir, which outlives a container restart: the check's state and
    # vLLM's warnings of an earlier container go, so a new engine measures itself again. The
    # record (self-metrics) stays until that measurement overwrites it.
    for arg in $checks; do
        case $arg in state=* | log=*) rm -f "${arg#*=}" ;; esac
    done
    # vLLM's logging config (`probes.engine_logging_config`, from the environment) into /tmp:
    # the image's root filesystem is read-only.
    printf "%s" "$GEMMA_VLLM_LOGGING" >"$VLLM_LOGGING_CONFIG_PATH"
fi
# shellcheck disable=SC2086 # key=value words, split on purpose (globbing is off: set -f)
python3 "$(dirname "$0")/liveness.py" serve $checks &
if [ "$role" = worker ]; then
    # Headless ranks start only once the leader's name resolves (LWS #746): vLLM gives up on an
    # unresolvable master address instead of retrying.
    until getent hosts "$LWS_LEADER_ADDRESS" >/dev/null; do
        echo "waiting for $LWS_LEADER_ADDRESS to resolve"
        sleep 2
    done
fi
exec vllm "$@"
