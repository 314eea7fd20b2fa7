package sixnines.worker;

import java.nio.ByteBuffer;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The receiving side of a client that pushes messages to a callback on its own thread (RabbitMQ's consumer, a Redis
 * subscriber): the callback stamps each message there, the client's hand-over, and queues it ({@link #arrived});
 * the role's thread takes them in order, waiting up to 50 ms when none is there. Backlog: messages stamped and not
 * yet taken.
 */
abstract class PushedArrivals implements Transport.Receiver {
    private static final long WAIT_MS = 50;
    private final LinkedBlockingQueue<Arrival> arrivals = new LinkedBlockingQueue<>();
    private long arrivedNs = -1;

    private record Arrival(long atNs, byte[] body) {
    }

    /** A message the client handed over, stamped now; called on the client's thread. */
    final void arrived(byte[] body) {
        arrivals.add(new Arrival(System.nanoTime(), body));
    }

    @Override
    public final int poll(ByteBuffer into) {
        Arrival next;
        try {
            next = arrivals.poll(WAIT_MS, TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return -1;
        }
        if (next == null) {
            return -1;
        }
        arrivedNs = next.atNs();
        into.put(0, next.body(), 0, Math.min(next.body().length, into.capacity()));
        return next.body().length;
    }

    @Override
    public final long arrivedNs() {
        return arrivedNs;
    }

    @Override
    public long offset() {
        return -1;
    }

    @Override
    public final long backlog() {
        return arrivals.size();
    }
}
