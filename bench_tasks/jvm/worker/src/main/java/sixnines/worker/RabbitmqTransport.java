package sixnines.worker;

import com.rabbitmq.client.AMQP;
import com.rabbitmq.client.Channel;
import com.rabbitmq.client.Connection;
import com.rabbitmq.client.ConnectionFactory;
import com.rabbitmq.client.impl.ClientVersion;
import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32;

/**
 * RabbitMQ through its Java client (`com.rabbitmq:amqp-client`, the client PerfTest uses): a route is the queue the
 * Python driver declares (`sixnines.<names>[.<route>]`, bench_tasks/systems/rabbitmq/driver.py), published to through
 * the cell's exchange (the default one, routing by queue name, or `<queue>.x`) and consumed from directly. The login
 * comes in the environment ({@link #SECRET_ENV}: `username`, `password`), never in the plan file, and is never
 * described. Each sender and receiver has a connection of its own, on the node the Python driver would pick for
 * its name (CRC-32 of the name over the address's nodes).
 *
 * A send is `basicPublish`, which frames and writes the message before it returns; with publisher confirms the
 * broker's ack (or nack) is the acknowledgement, taken first thing in the client's confirm callback on its
 * connection thread. A receiver is pushed deliveries on the client's consumer thread: it stamps each one there (the
 * client's hand-over, as PerfTest stamps it) and queues it for the role's thread.
 */
final class RabbitmqTransport implements Transport {
    static final String SECRET_ENV = "SIXNINES_RABBITMQ_SECRET";
    private static final String THREAD_PREFIX = "rmq-client-";
    private final Plan plan;
    private final Properties secret;
    private final ClientErrors errors = new ClientErrors();
    private final AtomicInteger threads = new AtomicInteger();

    RabbitmqTransport(Plan plan) {
        this.plan = plan;
        this.secret = SecretEnv.read(SECRET_ENV);
    }


    /** The route's queue, as bench_tasks.systems.rabbitmq.driver.queue_for names it. */
    String queue(String route) {
        return "sixnines." + plan.text("names") + (route.isEmpty() ? "" : "." + route);
    }

    /** The exchange the route's messages go to: '' (the default exchange) or the queue's own. */
    private String exchange(String queue) {
        return plan.text("rabbitmq.exchange").equals("default") ? "" : queue + ".x";
    }

    /** A new connection for `name` on the node the Python driver would choose for it. */
    Connection connect(String name) throws Exception {
        String[] urls = Arrays.stream(plan.text("address").split(",")).map(String::strip)
            .filter(u -> !u.isEmpty()).toArray(String[]::new);
        CRC32 crc = new CRC32();
        crc.update(name.getBytes(StandardCharsets.UTF_8));
        String url = urls[(int) (crc.getValue() % urls.length)];
        ConnectionFactory factory = new ConnectionFactory();
        factory.setUri(url);
        String path = URI.create(url).getPath();
        if (path == null || path.isEmpty() || path.equals("/")) {
            factory.setVirtualHost("/"); // the client reads an empty path as the vhost '', which does not exist
        }
        if (secret.containsKey("username")) {
            factory.setUsername(secret.getProperty("username"));
            factory.setPassword(secret.getProperty("password", ""));
        }
        factory.setAutomaticRecoveryEnabled(false); // a lost connection is an error, counted, not a silent retry
        factory.setThreadFactory(named());
        Connection connection = factory.newConnection(name);
        connection.addShutdownListener(cause -> {
            if (!cause.isInitiatedByApplication()) {
                errors.add(cause);
            }
        });
        return connection;
    }

    private ThreadFactory named() {
        return runnable -> {
            Thread thread = new Thread(runnable, THREAD_PREFIX + threads.incrementAndGet());
            thread.setDaemon(true);
            return thread;
        };
    }

    /** Delivery mode 2 where the cell's messages are persistent; a headers exchange routes by the `route` header. */
    private AMQP.BasicProperties properties(String queue) {
        AMQP.BasicProperties.Builder builder = new AMQP.BasicProperties.Builder();
        if (plan.text("rabbitmq.persistent").equals("true")) {
            builder.deliveryMode(2);
        }
        if (plan.text("rabbitmq.exchange").equals("headers")) {
            builder.headers(Map.of("route", queue));
        }
        return builder.build();
    }

    /** The partition a sample is recorded under: 0 for a queue with a leader (quorum), else -1. */
    int partition() {
        return (int) plan.number("rabbitmq.partition");
    }

    ClientErrors errors() {
        return errors;
    }

    @Override
    public Sender sender(String route, String name) throws Exception {
        String queue = queue(route);
        Connection connection = connect(name);
        Channel channel = connection.createChannel();
        boolean confirms = plan.text("rabbitmq.confirms").equals("true");
        RabbitmqSender sender =
            new RabbitmqSender(connection, channel, exchange(queue), queue, properties(queue), confirms, partition());
        if (confirms) {
            channel.confirmSelect();
            channel.addConfirmListener(sender::confirmed, sender::refused);
        }
        return sender;
    }

    @Override
    public Receiver receiver(String route, String name) throws Exception {
        return RabbitmqReceiver.subscribe(this, queue(route), name, plan);
    }

    @Override
    public Json describe() {
        return new Json().field("library", "amqp-client").field("version", ClientVersion.VERSION)
            .field("confirms", plan.text("rabbitmq.confirms")).field("acks", plan.text("rabbitmq.acks"))
            .field("prefetch", plan.number("rabbitmq.prefetch"));
    }

    @Override
    public String[] clientThreads() {
        // "AMQP Connection <host>:<port>" reads frames and runs confirm callbacks; ours run consumer deliveries
        return new String[] {"AMQP Connection", THREAD_PREFIX};
    }

    @Override
    public ClientErrors clientErrors() {
        return errors;
    }

    @Override
    public void close() {
        // every connection is closed by its sender or receiver
    }

    /** One connection and channel publishing to one queue; with confirms, delivery tags mapped back to seqs. */
    private static final class RabbitmqSender implements Sender {
        private final Connection connection;
        private final Channel channel;
        private final String exchange;
        private final String routingKey;
        private final AMQP.BasicProperties props;
        private final boolean confirms;
        private final int partition;
        private final ConcurrentNavigableMap<Long, Integer> unconfirmed = new ConcurrentSkipListMap<>();
        private volatile Acks acks;

        RabbitmqSender(Connection connection, Channel channel, String exchange, String routingKey,
                       AMQP.BasicProperties props, boolean confirms, int partition) {
            this.connection = connection;
            this.channel = channel;
            this.exchange = exchange;
            this.routingKey = routingKey;
            this.props = props;
            this.confirms = confirms;
            this.partition = partition;
        }

        @Override
        public long send(ByteBuffer message, int length, int seq, Acks acks) throws IOException {
            byte[] array = message.array();
            byte[] body = length == array.length ? array : Arrays.copyOf(array, length);
            long tag = channel.getNextPublishSeqNo();
            if (confirms) {
                this.acks = acks;
                unconfirmed.put(tag, seq);
            }
            try {
                channel.basicPublish(exchange, routingKey, props, body);
            } catch (IOException | RuntimeException e) {
                unconfirmed.remove(tag); // refused here: the producer records the error, no confirm will come
                throw e;
            }
            return -1;
        }

        void confirmed(long tag, boolean multiple) {
            settle(tag, multiple, null);
        }

        void refused(long tag, boolean multiple) {
            settle(tag, multiple, new IOException("nacked by the broker"));
        }

        private void settle(long tag, boolean multiple, Exception error) {
            Map<Long, Integer> settled = multiple ? unconfirmed.headMap(tag, true) : subMap(tag);
            for (Integer seq : settled.values()) {
                acks.acked(seq, partition, -1, error);
            }
            settled.clear();
        }

        private Map<Long, Integer> subMap(long tag) {
            return unconfirmed.subMap(tag, true, tag, true);
        }

        @Override
        public boolean acknowledgedOnReturn() {
            return false;
        }

        /** Waits up to 5 s for outstanding confirms (the Python driver's drain), then closes the connection. */
        @Override
        public void close() {
            try {
                if (confirms) {
                    channel.waitForConfirms(5_000);
                }
            } catch (Exception e) {
                // what stays unconfirmed is counted as unacknowledged by landing
            }
            try {
                connection.close(5_000);
            } catch (Exception e) {
                // already closed by the broker: its cause was counted
            }
        }
    }
}
