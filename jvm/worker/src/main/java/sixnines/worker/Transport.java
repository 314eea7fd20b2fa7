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

    /** Library versions and settings worth recording with the cell (a JSON object). */
    Json describe();

    @Override
    void close();

    interface Sender extends AutoCloseable {
        /** Hand `length` bytes of `message` (array-backed) to the client; its offset in the route, or -1. */
        long send(ByteBuffer message, int length) throws Exception;

        /** Whether `send` returning means the system has the message (a synchronous append: publish latency). */
        boolean acknowledgedOnReturn();

        @Override
        void close();
    }

    interface Receiver extends AutoCloseable {
        /** Copy the next message into `into` (array-backed); its length, or -1 when none is waiting. */
        int poll(ByteBuffer into);

        /** The offset of the message `poll` returned last. */
        long offset();

        /** Messages on the route not read yet (read from any thread), or -1 when the client cannot tell. */
        long backlog();

        /** Nothing was waiting: wait the way the settings say (spin, or a pauser's back-off). */
        void idle();

        /** A message arrived: the idle strategy starts over. */
        void busy();

        /** Whether `idle` spins or yields: the thread is then runnable all the time by design (docs/workers.md). */
        boolean spins();

        @Override
        void close();
    }
}
