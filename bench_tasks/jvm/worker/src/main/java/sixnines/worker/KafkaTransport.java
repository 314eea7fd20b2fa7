package sixnines.worker;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Properties;
import java.util.SplittableRandom;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Kafka through its Java client (seed 002 and OpenMessaging Benchmark use it): a route is the topic the Python
 * driver names (`sixnines-<names>[-<route>]`, bench_tasks/systems/kafka/driver.py), each receiver role reads it in
 * the route's consumer group (the topic's own name, as the Python consumers join), and the matrix's
 * `client.producer`/`client.consumer` maps reach the client as its properties, untouched (`kafka.producer.*`,
 * `kafka.consumer.*` in the plan). Settings that carry a secret (a SASL login), and the cell's access settings
 * (`kafka.common.*`: TLS, SASL), come in the environment ({@link #SECRET_ENV}, the same keys), never in the plan
 * file, and are never described.
 *
 * A send is asynchronous: `KafkaProducer.send` copies the value into its batch before it returns (so the caller
 * may reuse its buffer, as ProducerPerformance reuses its payload), and the delivery callback, on the client's
 * I/O thread, is the acknowledgement.
 */
final class KafkaTransport implements Transport {
    static final String SECRET_ENV = "SIXNINES_KAFKA_SECRET";
    private final Plan plan;
    private final Properties secret;
    private final String keys;
    private final ClientErrors errors = new ClientErrors();

    KafkaTransport(Plan plan) {
        this.plan = plan;
        this.keys = plan.text("kafka.keys");
        this.secret = SecretEnv.read(SECRET_ENV);
    }


    /** The route's topic, as bench_tasks.systems.kafka.driver.topic_for names it. */
    String topic(String route) {
        return "sixnines-" + plan.text("names") + (route.isEmpty() ? "" : "-" + route);
    }

    /** The cell's access settings, then the harness's own, then the matrix's for this kind of client (which win). */
    Properties settings(String name, String matrixPrefix) {
        Properties props = under("kafka.common.");
        props.setProperty("bootstrap.servers", plan.text("address"));
        props.setProperty("client.id", name);
        props.putAll(under(matrixPrefix));
        return props;
    }

    /** The plan's keys under `prefix` and the secret ones from the environment, prefix removed. */
    private Properties under(String prefix) {
        Properties props = plan.under(prefix);
        for (String key : secret.stringPropertyNames()) {
            if (key.startsWith(prefix)) {
                props.setProperty(key.substring(prefix.length()), secret.getProperty(key));
            }
        }
        return props;
    }

    ClientErrors errors() {
        return errors;
    }

    String startFrom() {
        return plan.text("kafka.start_from");
    }

    @Override
    public Sender sender(String route, String name) {
        Properties props = settings(name, "kafka.producer.");
        KafkaProducer<byte[], byte[]> producer =
            new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        String topic = topic(route);
        int partitions = producer.partitionsFor(topic).size(); // connect and learn the topic now, not on a timed send
        return new KafkaSender(producer, topic, partitions, keyScheme(name));
    }

    @Override
    public Receiver receiver(String route, String name) {
        return KafkaReceiver.subscribe(this, topic(route), name);
    }

    /** (seq -> key) and (seq -> partition) per `client.keys`, as the Python driver's `_key_function`. */
    private KeyScheme keyScheme(String name) {
        byte[] own = name.getBytes(StandardCharsets.UTF_8);
        SplittableRandom random = new SplittableRandom();
        return switch (keys) {
            case "none" -> new KeyScheme(false, seq -> null);
            case "round_robin" -> new KeyScheme(true, seq -> null);
            case "random" -> new KeyScheme(false, seq -> {
                byte[] key = new byte[8];
                random.nextBytes(key);
                return key;
            });
            case "per_producer" -> new KeyScheme(false, seq -> own);
            default -> throw new IllegalArgumentException("plan: kafka.keys=" + keys + " is unknown");
        };
    }

    record KeyScheme(boolean roundRobin, java.util.function.IntFunction<byte[]> key) {
    }

    @Override
    public Json describe() {
        return new Json().field("library", "kafka-clients").field("version", clientVersion())
            .field("keys", keys).field("producer", json(plan.under("kafka.producer.")))
            .field("consumer", json(plan.under("kafka.consumer.")));
    }

    /** The kafka-clients release on the classpath, from the resource every release ships (its AppInfoParser moved). */
    static String clientVersion() {
        Properties info = new Properties();
        try (var in = KafkaProducer.class.getClassLoader().getResourceAsStream("kafka/kafka-version.properties")) {
            if (in != null) {
                info.load(in);
            }
        } catch (IOException e) {
            return "unknown";
        }
        return info.getProperty("version", "unknown");
    }

    private static Json json(Properties props) {
        Json out = new Json();
        props.stringPropertyNames().stream().sorted().forEach(k -> out.field(k, props.getProperty(k)));
        return out;
    }

    @Override
    public String[] clientThreads() {
        return new String[] {"kafka-producer-"}; // "kafka-producer-network-thread | <client.id>", cut to 15 chars
    }

    @Override
    public ClientErrors clientErrors() {
        return errors;
    }

    @Override
    public void close() {
        // every client is closed by its sender or receiver
    }

    /** One producer on one topic. */
    private static final class KafkaSender implements Sender {
        private final KafkaProducer<byte[], byte[]> producer;
        private final String topic;
        private final int partitions;
        private final KeyScheme scheme;

        KafkaSender(KafkaProducer<byte[], byte[]> producer, String topic, int partitions, KeyScheme scheme) {
            this.producer = producer;
            this.topic = topic;
            this.partitions = partitions;
            this.scheme = scheme;
        }

        @Override
        public long send(ByteBuffer message, int length, int seq, Acks acks) {
            byte[] array = message.array();
            byte[] value = length == array.length ? array : Arrays.copyOf(array, length);
            Integer partition = scheme.roundRobin() ? seq % partitions : null;
            producer.send(new ProducerRecord<>(topic, partition, scheme.key().apply(seq), value), (meta, error) ->
                acks.acked(seq, meta == null ? -1 : meta.partition(), meta == null ? -1 : meta.offset(), error));
            return -1;
        }

        @Override
        public boolean acknowledgedOnReturn() {
            return false;
        }

        /** Waits for what is in flight (up to 5 s, as the Python driver's flush): every callback has run after. */
        @Override
        public void close() {
            producer.close(java.time.Duration.ofSeconds(5));
        }
    }
}
