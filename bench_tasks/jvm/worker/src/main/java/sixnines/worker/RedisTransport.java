package sixnines.worker;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisURI;
import io.lettuce.core.XAddArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Redis (and Valkey) through a Java client, Lettuce (`io.lettuce:lettuce-core`): a route is the channel (mode
 * `pubsub`) or the stream (mode `streams`) the Python driver names (`sixnines.<names>[.<route>]`,
 * bench_tasks/systems/redis/driver.py); a stream's consumer group is the one the driving process created. The login
 * comes in the environment ({@link #SECRET_ENV}: `username`, `password`), never in the plan file, and is never
 * described.
 *
 * A send is asynchronous, as redis-py's is in the Python driver: Lettuce queues the command (a copy of the message)
 * for its event loop, which writes it at once; an XADD's reply (the entry id) is the acknowledgement, taken first
 * thing in the reply's callback on that event loop. A PUBLISH's reply only counts the subscribers it reached: it is
 * no acknowledgement, and only its failure is recorded (the message's error).
 */
final class RedisTransport implements Transport {
    static final String SECRET_ENV = "SIXNINES_REDIS_SECRET";
    static final byte[] PAYLOAD_FIELD = {'d'}; // the one field of every stream entry (bench_tasks/systems/redis)
    private static final int SEQ_BITS = 20; // an entry id `<ms>-<seq>` as one offset: ms << 20 | seq
    private final Plan plan;
    private final RedisClient client;
    private final ClientErrors errors = new ClientErrors();

    RedisTransport(Plan plan) {
        this.plan = plan;
        this.client = RedisClient.create(uri(plan, SecretEnv.read(SECRET_ENV)));
    }

    private static RedisURI uri(Plan plan, Properties secret) {
        RedisURI.Builder builder = RedisURI.builder(RedisURI.create(plan.text("address").strip()))
            .withTimeout(Duration.ofSeconds(60)); // control calls; a stream read blocks `redis.block_ms` at most
        String password = secret.getProperty("password");
        if (password != null) {
            String user = secret.getProperty("username");
            builder = user == null ? builder.withPassword(password.toCharArray())
                : builder.withAuthentication(user, password);
        }
        return builder.build();
    }

    /** The route's channel or stream, as bench_tasks.systems.redis.driver.key_for names it. */
    byte[] key(String route) {
        String key = "sixnines." + plan.text("names") + (route.isEmpty() ? "" : "." + route);
        return key.getBytes(StandardCharsets.UTF_8);
    }

    boolean streams() {
        return plan.text("redis.mode").equals("streams");
    }

    StatefulRedisConnection<byte[], byte[]> connect(String name) {
        StatefulRedisConnection<byte[], byte[]> connection = client.connect(ByteArrayCodec.INSTANCE);
        connection.sync().clientSetname(name.getBytes(StandardCharsets.UTF_8));
        return connection;
    }

    RedisClient client() {
        return client;
    }

    ClientErrors errors() {
        return errors;
    }

    Plan plan() {
        return plan;
    }

    /** A stream entry id `<ms>-<seq>` as the sample's integer offset, as the Python driver records it. */
    static long entryOffset(String id) {
        int dash = id.indexOf('-');
        return (Long.parseLong(id.substring(0, dash)) << SEQ_BITS) | Long.parseLong(id.substring(dash + 1));
    }

    @Override
    public Sender sender(String route, String name) {
        return new RedisSender(connect(name), key(route), streams(), plan.number("redis.maxlen"));
    }

    @Override
    public Receiver receiver(String route, String name) {
        return streams() ? RedisStreamReceiver.join(this, key(route), name) : RedisSubscriber.subscribe(this, key(route));
    }

    @Override
    public Json describe() {
        return new Json().field("library", "lettuce-core").field("version", clientVersion())
            .field("mode", plan.text("redis.mode"))
            .field("read_count", plan.number("redis.read_count")).field("block_ms", plan.number("redis.block_ms"))
            .field("noack", plan.text("redis.noack"));
    }

    /** Lettuce's release, from its jar's manifest ("7.7.0.RELEASE/<commit>" -> "7.7.0.RELEASE"). */
    static String clientVersion() {
        String version = RedisClient.class.getPackage().getImplementationVersion();
        return version == null ? "unknown" : version.split("/", 2)[0];
    }

    @Override
    public String[] clientThreads() {
        return new String[] {"lettuce-"}; // its event loops ("lettuce-nioEventLoop-…", "lettuce-epollEventLoop-…")
    }

    @Override
    public ClientErrors clientErrors() {
        return errors;
    }

    /** Every connection was closed by its sender or receiver; the client's event loops end now. */
    @Override
    public void close() {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }

    /** One connection sending XADDs (streams) or PUBLISHes (pub/sub) to one key, without waiting for replies. */
    private static final class RedisSender implements Sender {
        private static final long CLOSE_WAIT_NS = 5_000_000_000L;
        private final StatefulRedisConnection<byte[], byte[]> connection;
        private final byte[] key;
        private final boolean streams;
        private final XAddArgs trim;
        private final AtomicLong unanswered = new AtomicLong();

        RedisSender(StatefulRedisConnection<byte[], byte[]> connection, byte[] key, boolean streams, long maxlen) {
            this.connection = connection;
            this.key = key;
            this.streams = streams;
            this.trim = maxlen > 0 ? new XAddArgs().maxlen(maxlen).approximateTrimming() : new XAddArgs();
        }

        @Override
        public long send(ByteBuffer message, int length, int seq, Acks acks) {
            byte[] body = Arrays.copyOf(message.array(), length); // the event loop encodes it after this returns
            unanswered.incrementAndGet();
            if (streams) {
                RedisFuture<String> id = connection.async().xadd(key, trim, Map.of(PAYLOAD_FIELD, body));
                id.whenComplete((entry, error) -> {
                    acks.acked(seq, 0, entry == null ? -1 : entryOffset(entry), asException(error));
                    unanswered.decrementAndGet();
                });
            } else {
                RedisFuture<Long> reached = connection.async().publish(key, body);
                reached.whenComplete((count, error) -> {
                    if (error != null) {
                        acks.acked(seq, -1, -1, asException(error));
                    }
                    unanswered.decrementAndGet();
                });
            }
            return -1;
        }

        private static Exception asException(Throwable error) {
            return error == null ? null : error instanceof Exception e ? e : new Exception(error);
        }

        @Override
        public boolean acknowledgedOnReturn() {
            return false;
        }

        /** Waits up to 5 s for the replies still due (the Python driver's drain), then closes the connection. */
        @Override
        public void close() {
            long deadline = System.nanoTime() + CLOSE_WAIT_NS;
            while (unanswered.get() > 0 && System.nanoTime() < deadline) {
                java.util.concurrent.locks.LockSupport.parkNanos(1_000_000);
            }
            connection.close();
        }
    }
}
