#!/usr/bin/python3
"""scripts/bench/repartition_pause.py - the pauses of scripts/bench/repartition's online move.

usage: repartition_pause.py BOOTSTRAP TOPIC MOVE_MS WANT [BUILT_MS]

Reads TOPIC (rp-out) whole; the records of the online phase carry, as their value, the wall
clock (ms) at which beck processed them (BENCH_STAMP=1 in scripts/bench/repartition.lua), and
as their timestamp the time the steady producer made them. For each key, a pause between two
consecutive outputs is the gap between their processing beyond the gap between their
making: how long the key's updates stopped. MOVE_MS is the wall clock when the move was
asked for: pauses that end after it are the move's, those before are the baseline.
Prints `<name> <value>` lines:
  state_pause_ms         the longest pause of any key after the move was asked for
  state_pause_ms_nomove  the same before it (the app's own jitter: commits, GC)
  output_gap_ms          the longest time no record at all came out, after the move
  output_gap_ms_nomove   the same before it
  output_gap_end_ms      when the longest gap after the move ended, in ms after MOVE_MS
  output_gap_move_ms     with BUILT_MS (when the last new task was built): the longest
                         gap that began between MOVE_MS and it, the move's own
  own_gap_ms             the longest output gap after the move less what the input explains:
                         a gap is the app's own only from when a record it had not processed
                         could have reached it (made, plus the median time from making to
                         processing before the move); own_gap_ms_nomove: before the move
  stamped                the online phase's outputs read (must be WANT)
"""
import sys

from kafka import KafkaConsumer, TopicPartition


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    bootstrap, topic, move_ms, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    built_ms = int(sys.argv[5]) if len(sys.argv) == 6 else 0
    consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    per_key = {}
    times = []
    made = []
    done = {tp: consumer.position(tp) >= ends[tp] for tp in tps}
    while not all(done.values()):
        batch = consumer.poll(timeout_ms=2000)
        if not batch:
            break
        for tp, records in batch.items():
            for r in records:
                if r.value:
                    processed = int(r.value)
                    per_key.setdefault(r.key, []).append((r.timestamp, processed))
                    times.append(processed)
                    made.append((processed, r.timestamp))
            done[tp] = consumer.position(tp) >= ends[tp]
    consumer.close()

    pause = {True: 0, False: 0}
    for outs in per_key.values():
        for (c1, p1), (c2, p2) in zip(outs, outs[1:]):
            after = p2 >= move_ms
            pause[after] = max(pause[after], (p2 - p1) - (c2 - c1))
    gap = {True: 0, False: 0}
    gap_end, gap_move = 0, 0
    times.sort()
    for a, b in zip(times, times[1:]):
        after = b >= move_ms
        if after and b - a > gap[True]:
            gap_end = b
        gap[after] = max(gap[after], b - a)
        if after and a <= built_ms:
            gap_move = max(gap_move, b - a)
    print("state_pause_ms %d" % pause[True])
    print("state_pause_ms_nomove %d" % pause[False])
    print("output_gap_ms %d" % gap[True])
    print("output_gap_ms_nomove %d" % gap[False])
    # where the longest gap after the move was (its end, ms after the move was asked for:
    # matched against the app's log to see what it waited for)
    print("output_gap_end_ms %d" % (gap_end - move_ms if gap_end else -1))
    if built_ms:
        # the move itself: gaps that began before its last new task was built (after it,
        # the new tasks seal their state: docs/repartitioning.md, Sealing)
        print("output_gap_move_ms %d" % gap_move)
    # the app's own part of each gap: from max(the gap's start, when the first record
    # processed after it could have arrived) to its end
    made.sort()
    lat = sorted(p - c for p, c in made if p < move_ms)
    typical = lat[len(lat) // 2] if lat else 0
    first_made = [0] * len(made)  # the earliest making among the records processed from i on
    low = None
    for i in range(len(made) - 1, -1, -1):
        low = made[i][1] if low is None else min(low, made[i][1])
        first_made[i] = low
    own = {True: 0, False: 0}
    for i in range(len(made) - 1):
        a, b = made[i][0], made[i + 1][0]
        start = max(a, first_made[i + 1] + typical)
        own[b >= move_ms] = max(own[b >= move_ms], b - start)
    print("own_gap_ms %d" % own[True])
    print("own_gap_ms_nomove %d" % own[False])
    print("stamped %d" % len(times))
    if len(times) != want:
        sys.exit("repartition_pause: %d stamped outputs, %d wanted" % (len(times), want))


if __name__ == "__main__":
    main()
