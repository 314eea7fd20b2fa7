package sixnines.worker;

import io.lettuce.core.Consumer;
import io.lettuce.core.StreamMessage;
import io.lettuce.core.XReadArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * A reader of the cell's consumer group on one stream, used by the role's thread only: `poll` hands over one entry
 * at a time from the batch the last XREADGROUP returned, and reads again (COUNT `redis.read_count`, BLOCK
 * `redis.block_ms`) when that batch is used up, acknowledging the batch it finished (XACK, sent without waiting
 * for its reply, ahead of the read, as the Python driver writes both together) unless the cell reads with NOACK.
 * Ready once the server answered a PING on its connection. Backlog: entries read and not yet taken.
 */
final class RedisStreamReceiver implements Transport.Receiver {
    private static final long AFTER_ERROR_NS = 10_000_000L;
    private final StatefulRedisConnection<byte[], byte[]> connection;
    private final byte[] stream;
    private final byte[] group;
    private final Consumer<byte[]> consumer;
    private final XReadArgs read;
    private final boolean noack;
    private final ClientErrors errors;
    private final List<String> done = new ArrayList<>();
    private Iterator<StreamMessage<byte[], byte[]>> batch = List.<StreamMessage<byte[], byte[]>>of().iterator();
    private volatile int waiting;
    private long offset = -1;

    private RedisStreamReceiver(RedisTransport transport, byte[] stream, String name) {
        Plan plan = transport.plan();
        this.connection = transport.connect(name);
        this.stream = stream;
        this.group = plan.text("redis.group").getBytes(StandardCharsets.UTF_8);
        this.consumer = Consumer.from(group, name.getBytes(StandardCharsets.UTF_8));
        this.noack = plan.text("redis.noack").equals("true");
        XReadArgs args = XReadArgs.Builder.count(plan.number("redis.read_count")).block(plan.number("redis.block_ms"));
        this.read = noack ? args.noack(true) : args;
        this.errors = transport.errors();
    }

    static RedisStreamReceiver join(RedisTransport transport, byte[] stream, String name) {
        RedisStreamReceiver receiver = new RedisStreamReceiver(transport, stream, name);
        receiver.connection.sync().ping(); // connected and answering before the producers start
        return receiver;
    }

    @Override
    public int poll(ByteBuffer into) {
        if (!batch.hasNext() && !readMore()) {
            return -1;
        }
        StreamMessage<byte[], byte[]> entry = batch.next();
        waiting = waiting - 1;
        byte[] body = entry.getBody().values().iterator().next(); // the entry's one field
        into.put(0, body, 0, Math.min(body.length, into.capacity()));
        offset = RedisTransport.entryOffset(entry.getId());
        if (!noack) {
            done.add(entry.getId());
        }
        return body.length;
    }

    private boolean readMore() {
        if (!done.isEmpty()) {
            connection.async().xack(stream, group, done.toArray(String[]::new));
            done.clear();
        }
        List<StreamMessage<byte[], byte[]>> entries;
        try {
            entries = connection.sync().xreadgroup(consumer, read, XReadArgs.StreamOffset.lastConsumed(stream));
        } catch (RuntimeException e) {
            errors.add(e);
            LockSupport.parkNanos(AFTER_ERROR_NS);
            return false;
        }
        batch = entries.iterator();
        waiting = entries.size();
        return batch.hasNext();
    }

    @Override
    public long offset() {
        return offset;
    }

    @Override
    public int partition() {
        return 0; // a stream is one ordered log on the primary, recorded as partition 0 (as the Python driver)
    }

    @Override
    public long backlog() {
        return waiting;
    }

    /** Acknowledges the last batch taken, then closes; a refused XACK is a client error, never a lost sample file. */
    @Override
    public void close() {
        try {
            if (!done.isEmpty()) {
                connection.sync().xack(stream, group, done.toArray(String[]::new));
            }
        } catch (RuntimeException e) {
            errors.add(e);
        }
        connection.close();
    }
}
