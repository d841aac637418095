# scripts/bench/lib/broker.sh - the broker a bench runs against (sourced).
#
# BENCH_BROKER picks it: "kafka", a real Apache Kafka 4.4.0 (KRaft, one broker, started by
# scripts/kafka on 127.0.0.1; needs `make deps`), or "dev", the dev broker (`beck broker`,
# librdkafka's mock cluster, its own process; it keeps only ~5 MiB a partition). Each bench
# names its own default (broker_pick). More settings for Kafka: BENCH_KAFKA_HEAP (the
# broker's -Xmx, 1g), BENCH_KAFKA_SET (more server settings, "key=value key=value").
#
#   broker_pick DEFAULT         sets BROKER_KIND from BENCH_BROKER or DEFAULT; 2 on a bad value
#   broker_start DIR WHO TOPIC...
#                               starts the broker with its data and logs under DIR and
#                               creates each TOPIC, "name:partitions[:key=value,...]" (the
#                               configs apply on Kafka only: the dev broker has none); sets
#                               BS (the bootstrap) and BROKER_PID (the process that must stay
#                               up: the dev broker, or Kafka's broker 1). On failure prints
#                               "WHO: ..." and the broker's log's end, returns 1
#   broker_create DIR TOPIC...  creates more topics on the running broker (Kafka only: the
#                               dev broker takes its topics when it starts)
#   broker_alive                the broker process runs
#   broker_stop                 stops it by PID (Kafka: scripts/kafka stop --dir DIR/kafka),
#                               waits; its data stays under DIR for the caller to delete
#   broker_du                   bytes the broker's data takes on disk (Kafka), else 0

BROKER_KIND=
BROKER_PID=
BROKER_DIR=
BS=

broker_pick() {
    BROKER_KIND=${BENCH_BROKER:-$1}
    case "$BROKER_KIND" in
        kafka | dev) return 0 ;;
        *) echo "BENCH_BROKER=$BROKER_KIND: kafka or dev" >&2; return 2 ;;
    esac
}

broker_start() {
    local dir=$1 who=$2 root t name parts
    shift 2
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
    BROKER_DIR=$dir
    if [ "$BROKER_KIND" = dev ]; then
        local args=()
        for t in "$@"; do
            IFS=: read -r name parts _ <<< "$t"
            args+=(--topic "$name:$parts")
        done
        "$root/bin/beck" broker ${args[@]+"${args[@]}"} > "$dir/broker.out" 2> "$dir/broker.log" &
        BROKER_PID=$!
        for _ in $(seq 1 600); do
            grep -qs '^control ' "$dir/broker.out" && break
            broker_alive || break
            sleep 0.1
        done
        grep -qs '^control ' "$dir/broker.out" || {
            echo "$who: the dev broker did not start" >&2
            tail -n 20 "$dir/broker.log" >&2
            return 1
        }
        BS=$(head -n 1 "$dir/broker.out")
        return 0
    fi
    local sets=() kv
    for kv in ${BENCH_KAFKA_SET:-}; do sets+=(--set "$kv"); done
    BS=$("$root/scripts/kafka" start --dir "$dir/kafka" --heap "${BENCH_KAFKA_HEAP:-1g}" \
         ${sets[@]+"${sets[@]}"} 2> "$dir/broker.log") || {
        echo "$who: Kafka did not start (scripts/kafka start --dir $dir/kafka)" >&2
        tail -n 20 "$dir/broker.log" >&2
        tail -n 20 "$dir/kafka/broker-1/server.log" >&2 2> /dev/null
        return 1
    }
    BROKER_PID=$(cat "$dir/kafka/broker-1/pid")
    broker_create "$dir" "$@"
}

broker_create() {
    local dir=$1 root t name parts configs
    shift
    [ "$BROKER_KIND" = kafka ] || return 0
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
    for t in "$@"; do
        IFS=: read -r name parts configs <<< "$t"
        # shellcheck disable=SC2086
        /usr/bin/python3 "$root/spec/fixtures/kafka_client.py" create "$BS" "$name" "$parts" 1 \
            ${configs//,/ } > /dev/null 2>> "$dir/broker.log" || {
            echo "creating topic $name on Kafka failed:" >&2
            tail -n 5 "$dir/broker.log" >&2
            return 1
        }
    done
}

broker_alive() { [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2> /dev/null; }

broker_stop() {
    [ -n "$BROKER_PID" ] || return 0
    if [ "$BROKER_KIND" = kafka ]; then
        "$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)/scripts/kafka" stop \
            --dir "$BROKER_DIR/kafka" > /dev/null 2>&1 || true
    else
        kill -TERM "$BROKER_PID" 2> /dev/null || true
        local i
        for (( i = 0; i < 100; i++ )); do
            kill -0 "$BROKER_PID" 2> /dev/null || break
            sleep 0.1
        done
        kill -KILL "$BROKER_PID" 2> /dev/null || true
        wait "$BROKER_PID" 2> /dev/null || true
    fi
    BROKER_PID=
}

broker_du() {
    if [ "$BROKER_KIND" = kafka ] && [ -d "$BROKER_DIR/kafka" ]; then
        du -sb "$BROKER_DIR/kafka" | cut -f1
    else
        echo 0
    fi
}
