// The Kafka Streams side of beck's parity harness (scripts/parity, docs/parity.md): the
// topologies of scripts/parity-apps/topologies.lua, written with Kafka Streams 4.4's DSL, each
// in its own KafkaStreams instance of this JVM.
//
//   java -cp 'vendor/kstreams/lib/*' scripts/parity-apps/Parity.java BOOTSTRAP STATE_DIR INPUT \
//        NAME=APP_ID=OUT_TOPIC...
//
// INPUT is the prefix of the input topics: INPUT-in (a stream), INPUT-tbl and INPUT-right (a
// table, or a second stream). Keys and values are strings; windowed keys are written as beck
// writes them with its string serde (key@start, sessions key@start/end). Caching is off, so
// every update is forwarded, as beck does. Runs until SIGTERM, then closes every instance.
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowStore;

public final class Parity {
    static String in, tbl, right;

    // The store retention of the emit-final topologies (and of their beck twins): Kafka
    // Streams 4.4 reads a closing window from its store only while its start is within the
    // retention of the newest window start put, so with the default (size + grace) a jump of
    // stream time skips windows; beck emits every window that closes (docs/dsl.md).
    static final long FINAL_RETENTION = 73000;

    static long num(String s) {
        return Long.parseLong(s);
    }

    static String pair(String l, String r) {
        return (l == null ? "-" : l) + "|" + (r == null ? "-" : r);
    }

    static String timeKey(Windowed<String> w) {
        return w.key() + "@" + w.window().start();
    }

    static String sessionKey(Windowed<String> w) {
        return w.key() + "@" + w.window().start() + "/" + w.window().end();
    }

    static KStream<String, String> stream(StreamsBuilder b, String topic) {
        return b.stream(topic, Consumed.with(Serdes.String(), Serdes.String()));
    }

    static KTable<String, String> table(StreamsBuilder b, String topic) {
        return b.table(topic, Consumed.with(Serdes.String(), Serdes.String()));
    }

    /** A versioned table (KIP-889), 5 s of history: a stream joins it as of its records' times. */
    static KTable<String, String> versioned(StreamsBuilder b, String topic) {
        return b.table(topic, Consumed.with(Serdes.String(), Serdes.String()),
                       Materialized.<String, String>as(
                           Stores.persistentVersionedKeyValueStore("versioned",
                                                                   Duration.ofMillis(5000)))
                           .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
    }

    static String triple(String v) {
        return v == null ? null : Long.toString(num(v) * 3);
    }

    /** process_store: a running sum per key in a store of the processor's own. */
    static final class Sums implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, String> st;

        @Override
        public void init(ProcessorContext<String, String> context) {
            ctx = context;
            st = context.getStateStore("sums");
        }

        @Override
        public void process(Record<String, String> r) {
            String old = st.get(r.key());
            String total = Long.toString(num(old == null ? "0" : old) + num(r.value()));
            st.put(r.key(), total);
            ctx.forward(r.withValue(total));
        }
    }

    static GlobalKTable<String, String> global(StreamsBuilder b, String topic) {
        return b.globalTable(topic, Consumed.with(Serdes.String(), Serdes.String()));
    }

    /** The topology `name`, writing to `out`. Each matches its namesake in topologies.lua. */
    static void build(StreamsBuilder b, String name, String out) {
        Produced<String, String> to = Produced.with(Serdes.String(), Serdes.String());
        JoinWindows jw = JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(2000),
                                                              Duration.ofMillis(1000));
        switch (name) {
        case "count":
            stream(b, in).groupByKey().count().toStream()
                .mapValues(v -> v == null ? null : v.toString()).to(out, to);
            break;
        case "reduce":
            stream(b, in).groupByKey()
                .reduce((a, v) -> Long.toString(num(a) + num(v))).toStream().to(out, to);
            break;
        case "regroup":
            stream(b, in).selectKey((k, v) -> "g" + (num(v) % 5))
                .groupByKey(Grouped.with("regroup", Serdes.String(), Serdes.String())).count()
                .toStream().mapValues(v -> v == null ? null : v.toString()).to(out, to);
            break;
        case "tumbling":
            stream(b, in).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(10000),
                                                       Duration.ofMillis(3000)))
                .count().toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "sliding":
            stream(b, in).groupByKey()
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(5000),
                                                                    Duration.ofMillis(2000)))
                .count().toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "sliding_final":
            stream(b, in).groupByKey()
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(5000),
                                                                    Duration.ofMillis(2000)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("final")
                           .withRetention(Duration.ofMillis(FINAL_RETENTION)))
                .toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "sliding_reduce":
            stream(b, in).groupByKey()
                .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(3000),
                                                                    Duration.ofMillis(1000)))
                .reduce((a, v) -> Long.toString(num(a) + num(v))).toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v))
                .to(out, to);
            break;
        case "hopping":
            stream(b, in).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(10000),
                                                       Duration.ofMillis(2000))
                                .advanceBy(Duration.ofMillis(5000)))
                .count().toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "session":
            stream(b, in).groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(3000),
                                                                   Duration.ofMillis(2000)))
                .count().toStream()
                .map((w, v) -> KeyValue.pair(sessionKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "tumbling_final":
            stream(b, in).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(10000),
                                                       Duration.ofMillis(3000)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("final")
                           .withRetention(Duration.ofMillis(FINAL_RETENTION)))
                .toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "tumbling_suppress":
            stream(b, in).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(10000),
                                                       Duration.ofMillis(3000)))
                .count()
                .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                .toStream()
                .map((w, v) -> KeyValue.pair(timeKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "table_suppress":
            table(b, tbl)
                .suppress(Suppressed.untilTimeLimit(Duration.ofMillis(2000),
                                                    Suppressed.BufferConfig.unbounded()))
                .toStream().to(out, to);
            break;
        case "cogroup":
            stream(b, in).groupByKey()
                .cogroup((String k, String v, String a) -> Long.toString(num(a) + num(v)))
                .cogroup(stream(b, right).groupByKey(),
                         (String k, String v, String a) -> Long.toString(num(a) - num(v)))
                .aggregate(() -> "0").toStream().to(out, to);
            break;
        case "tumbling_bytes":
            // windowed keys as TimeWindowedSerde writes them (beck: dsl.serde.time_windowed)
            stream(b, in).groupByKey()
                .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(10000),
                                                       Duration.ofMillis(3000)))
                .count().toStream()
                .mapValues(v -> v == null ? null : v.toString())
                .to(out, Produced.with(WindowedSerdes.timeWindowedSerdeFrom(String.class, 10000L),
                                       Serdes.String()));
            break;
        case "session_final":
            stream(b, in).groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(3000),
                                                                   Duration.ofMillis(2000)))
                .emitStrategy(EmitStrategy.onWindowClose())
                .count(Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("final")
                           .withRetention(Duration.ofMillis(FINAL_RETENTION)))
                .toStream()
                .map((w, v) -> KeyValue.pair(sessionKey(w), v == null ? null : v.toString()))
                .to(out, to);
            break;
        case "stream_table":
            stream(b, in).join(table(b, tbl), Parity::pair).to(out, to);
            break;
        case "stream_table_left":
            stream(b, in).leftJoin(table(b, tbl), Parity::pair).to(out, to);
            break;
        case "stream_versioned":
            stream(b, in).join(versioned(b, tbl), Parity::pair).to(out, to);
            break;
        case "stream_versioned_left":
            stream(b, in).leftJoin(versioned(b, tbl), Parity::pair).to(out, to);
            break;
        case "stream_global":
            stream(b, in).join(global(b, tbl), (k, v) -> "k" + (num(v) % 16), Parity::pair)
                .to(out, to);
            break;
        case "stream_global_left":
            stream(b, in).leftJoin(global(b, tbl), (k, v) -> "k" + (num(v) % 16), Parity::pair)
                .to(out, to);
            break;
        case "table_table":
            table(b, tbl).join(table(b, right), Parity::pair).toStream().to(out, to);
            break;
        case "table_table_left":
            table(b, tbl).leftJoin(table(b, right), Parity::pair).toStream().to(out, to);
            break;
        case "table_table_outer":
            table(b, tbl).outerJoin(table(b, right), Parity::pair).toStream().to(out, to);
            break;
        case "fk_join":
            table(b, tbl).join(table(b, right), v -> "k" + (num(v) % 16), Parity::pair)
                .toStream().to(out, to);
            break;
        case "fk_left_join":
            table(b, tbl).leftJoin(table(b, right), v -> "k" + (num(v) % 16), Parity::pair)
                .toStream().to(out, to);
            break;
        case "stream_stream":
            stream(b, in).join(stream(b, right), Parity::pair, jw).to(out, to);
            break;
        case "stream_stream_left":
            stream(b, in).leftJoin(stream(b, right), Parity::pair, jw).to(out, to);
            break;
        case "stream_stream_outer":
            stream(b, in).outerJoin(stream(b, right), Parity::pair, jw).to(out, to);
            break;
        case "table_filter":
            table(b, tbl).filter((k, v) -> num(v) % 2 == 0).toStream().to(out, to);
            break;
        case "merge":
            stream(b, in).merge(stream(b, right)).peek((k, v) -> { }).mapValues(Parity::triple)
                .to(out, to);
            break;
        case "repartition":
            stream(b, in)
                .repartition(Repartitioned.<String, String>as("rep").withNumberOfPartitions(3))
                .groupByKey().count().toStream()
                .mapValues(v -> v == null ? null : v.toString()).to(out, to);
            break;
        case "to_fn":
            stream(b, in).to((k, v, rc) -> num(v) % 2 == 0 ? out : out + "-odd", to);
            break;
        case "process_store":
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore("sums"),
                                                        Serdes.String(), Serdes.String()));
            stream(b, in).process(Sums::new, "sums").to(out, to);
            break;
        case "table_regroup":
            table(b, tbl)
                .groupBy((k, v) -> KeyValue.pair("g" + (num(v) % 5), v),
                         Grouped.with("regroup", Serdes.String(), Serdes.String()))
                .reduce((a, v) -> Long.toString(num(a) + num(v)),
                        (a, v) -> Long.toString(num(a) - num(v)))
                .toStream().to(out, to);
            break;
        default:
            throw new IllegalArgumentException("no topology " + name);
        }
    }

    public static void main(String[] args) throws InterruptedException {
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        if (args.length < 4) {
            System.err.println("usage: Parity BOOTSTRAP STATE_DIR INPUT NAME=APP_ID=OUT...");
            System.exit(2);
        }
        in = args[2] + "-in";
        tbl = args[2] + "-tbl";
        right = args[2] + "-right";
        List<KafkaStreams> all = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String[] spec = args[i].split("=", 3);
            Properties p = new Properties();
            p.put(StreamsConfig.APPLICATION_ID_CONFIG, spec[1]);
            p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
            p.put(StreamsConfig.STATE_DIR_CONFIG, args[1] + "/" + spec[1]);
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
            p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
            p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
            p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
            p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
            p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
            p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
            // a left or outer stream-stream join emits its unpaired records at most once a
            // second of wall-clock time by default (an internal setting): at every record that
            // moves stream time, as beck does, its output depends on the data alone
            p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_OUTER_JOIN_SPURIOUS_RESULTS_FIX,
                  0L);
            // so do emit-final windows (KIP-825): checked at every record, as beck does
            p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
            StreamsBuilder b = new StreamsBuilder();
            build(b, spec[0], spec[2]);
            KafkaStreams ks = new KafkaStreams(b.build(), p);
            ks.setUncaughtExceptionHandler(e -> {
                System.err.println("parity: " + spec[0] + ": " + e);
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                    .StreamThreadExceptionResponse.SHUTDOWN_APPLICATION;
            });
            all.add(ks);
        }
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            for (KafkaStreams ks : all) {
                ks.close(Duration.ofSeconds(10));
            }
            done.countDown();
        }));
        for (KafkaStreams ks : all) {
            ks.start();
        }
        System.out.println("started " + all.size());
        System.out.flush();
        done.await();
    }
}
