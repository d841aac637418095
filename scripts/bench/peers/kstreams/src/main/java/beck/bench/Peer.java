package beck.bench;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams side of scripts/bench/peers/run:
 *
 *   Peer JOB BOOTSTRAP APP_ID IN OUT STATE_DIR COMMIT_INTERVAL_MS CACHE_MAX_BYTES
 *
 * JOB "identity" writes every record of IN to OUT. JOB "count" counts by key in a
 * persistent (RocksDB) key-value store "counts" with its changelog and forwards every new
 * count as a decimal string: beck's count processor, line for line. It is not
 * groupByKey().count(): the DSL's count keeps its output in the same record cache as its
 * store and so forwards one update per key per commit, where beck forwards every record.
 * Here the cache sits in front of the store and its changelog only, as beck's does.
 * Runs until SIGTERM, then closes.
 */
public final class Peer {
    private static final String STORE = "counts";

    /** get + 1 + put, then forward the count; values are decimal strings, as in beck. */
    static final class Count implements Processor<byte[], byte[], byte[], byte[]> {
        private ProcessorContext<byte[], byte[]> ctx;
        private KeyValueStore<byte[], String> counts;

        @Override
        public void init(ProcessorContext<byte[], byte[]> context) {
            ctx = context;
            counts = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<byte[], byte[]> r) {
            String old = counts.get(r.key());
            String s = Long.toString(old == null ? 1 : Long.parseLong(old) + 1);
            counts.put(r.key(), s);
            ctx.forward(r.withValue(s.getBytes(StandardCharsets.US_ASCII)));
        }
    }

    public static void main(String[] args) throws InterruptedException {
        // slf4j-simple reads this when the first logger is made: warnings and errors only.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        if (args.length != 8) {
            System.err.println("usage: Peer identity|count BOOTSTRAP APP_ID IN OUT STATE_DIR"
                               + " COMMIT_INTERVAL_MS CACHE_MAX_BYTES");
            System.exit(2);
        }
        String job = args[0], in = args[3], out = args[4];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[5]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(args[6]));
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(args[7]));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder b = new StreamsBuilder();
        KStream<byte[], byte[]> src =
            b.stream(in, Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()));
        if (job.equals("identity")) {
            src.to(out, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        } else if (job.equals("count")) {
            // Stores' defaults: RocksDB, changelog on; caching is off unless asked for.
            b.addStateStore(Stores.keyValueStoreBuilder(Stores.persistentKeyValueStore(STORE),
                                                        Serdes.ByteArray(), Serdes.String())
                                .withCachingEnabled());
            src.process(Count::new, STORE)
                .to(out, Produced.with(Serdes.ByteArray(), Serdes.ByteArray()));
        } else {
            System.err.println("Peer: unknown job " + job);
            System.exit(2);
        }

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setUncaughtExceptionHandler(e -> {
            e.printStackTrace();
            done.countDown();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        System.out.println("started " + job);
        done.await();
    }
}
