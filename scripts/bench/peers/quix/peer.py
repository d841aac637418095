"""The Quix Streams side of scripts/bench/peers/run:

    python peer.py JOB BOOTSTRAP GROUP IN OUT STATE_DIR COMMIT_INTERVAL_MS

JOB "identity" writes every record of IN to OUT unchanged (bytes in, bytes out).
JOB "count" counts by key in Quix's state (RocksDB, one store per partition, changelog
topic on) and forwards every new count as a decimal string, as beck's count does. Quix
keeps a checkpoint's updates in its transaction and writes them to RocksDB and the
changelog once per key per commit; it has no cache size to set. Runs until SIGTERM
(Application.run() stops on it).
"""
import sys

from quixstreams import Application


def main(argv):
    if len(argv) != 8:
        sys.exit("usage: peer.py identity|count BOOTSTRAP GROUP IN OUT STATE_DIR COMMIT_INTERVAL_MS")
    job, bootstrap, group, in_topic, out_topic, state_dir, commit_ms = argv[1:]
    app = Application(
        broker_address=bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        commit_interval=int(commit_ms) / 1000.0,
        processing_guarantee="at-least-once",
        state_dir=state_dir,
        use_changelog_topics=True,
        loglevel="WARNING",
    )
    # Raw bytes in; the default deserializer would parse every value as JSON.
    inp = app.topic(in_topic, key_deserializer="bytes", value_deserializer="bytes")
    sdf = app.dataframe(inp)
    if job == "identity":
        out = app.topic(out_topic, key_serializer="bytes", value_serializer="bytes")
    elif job == "count":
        out = app.topic(out_topic, key_serializer="bytes", value_serializer="string")

        def count(_value, state):
            # The state is scoped to the record's key.
            n = state.get("n", 0) + 1
            state.set("n", n)
            return str(n)

        sdf = sdf.apply(count, stateful=True)
    else:
        sys.exit(f"peer.py: unknown job {job}")
    sdf.to_topic(out)
    print(f"started {job}", flush=True)
    app.run()


if __name__ == "__main__":
    main(sys.argv)
