package sixnines.worker;

import java.nio.ByteBuffer;

/**
 * The small driver interface of the JVM worker (STYLE 1, OpenMessaging Benchmark's driver-api): open a sender or a
 * receiver on a route, send a message, hand over what arrived. It never reads a clock and never decides when to
 * send: timing, schedules and samples live in the roles ({@link Producer}, {@link Consumer}).
 */
interface Transport extends AutoCloseable {

    /** A sender on the route the plan names; `name` identifies it to the system. */
    Sender sender(String route, String name) throws Exception;

    /** A receiver on `route` that sees every message sent from now on. */
    Receiver receiver(String route, String name) throws Exception;

    /** Library versions and settings worth recording with the cell (a JSON object, no secret in it). */
    Json describe();

    /**
     * OS-name prefixes of the client's own threads that every message passes (Kafka: the producer's I/O thread,
     * which sends batches and runs the delivery callbacks), judged for starvation like the role's own.
     */
    default String[] clientThreads() {
        return new String[0];
    }

    /** Errors of the client that belong to no message (a failed poll, a refused commit), for the harness facts. */
    default ClientErrors clientErrors() {
        return ClientErrors.NONE;
    }

    @Override
    void close();

    interface Sender extends AutoCloseable {
        /**
         * Hand `length` bytes of `message` (array-backed) to the client; its offset in the route, or -1. The client
         * has taken the bytes when this returns (the caller reuses the buffer). A sender that is not
         * {@link #acknowledgedOnReturn} reports message `seq`'s acknowledgement to `acks` later, from the client's
         * own thread.
         */
        long send(ByteBuffer message, int length, int seq, Acks acks) throws Exception;

        /** Whether `send` returning means the system has the message (a synchronous append: publish latency). */
        boolean acknowledgedOnReturn();

        @Override
        void close();
    }

    /** Where an asynchronous sender reports each acknowledgement, the moment its client calls back. */
    interface Acks {
        /** Message `seq` is acknowledged at `partition`/`offset` (-1 unknown), or refused with `error`. */
        void acked(int seq, int partition, long offset, Exception error);
    }

    interface Receiver extends AutoCloseable {
        /** Copy the next message into `into` (array-backed); its length, or -1 when none is waiting. */
        int poll(ByteBuffer into);

        /**
         * When the client handed the message `poll` returned last to the worker, where that is not `poll`'s return: a
         * push client's delivery callback, which stamps it before queueing it for the role's thread. -1: `poll`'s
         * return is the hand-over (the role stamps it).
         */
        default long arrivedNs() {
            return -1;
        }

        /** The offset of the message `poll` returned last. */
        long offset();

        /** The partition of the message `poll` returned last, or -1 where the system has none. */
        default int partition() {
            return -1;
        }

        /** Messages on the route not read yet (read from any thread), or -1 when the client cannot tell. */
        long backlog();

        /**
         * Nothing was waiting: wait the way the settings say (spin, or a pauser's back-off). By default nothing more:
         * a client whose `poll` waits for a message has waited already.
         */
        default void idle() {
        }

        /** A message arrived: the idle strategy starts over (by default there is none of the worker's own). */
        default void busy() {
        }

        /** Whether `idle` spins or yields: the thread is then runnable all the time by design (docs/workers.md). */
        default boolean spins() {
            return false;
        }

        @Override
        void close();
    }
}
