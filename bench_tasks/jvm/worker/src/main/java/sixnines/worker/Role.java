package sixnines.worker;

import java.util.Map;

/**
 * One worker role (docs/workers.md, "Roles"): set up, say `ready`, run its part of the schedule, write its sample
 * file. The watch thread asks it, every report period, for what it has handled, its backlog and its fresh
 * latencies ({@link #progress}); only the role's message thread writes its columns.
 */
abstract class Role {
    /** How many fresh values a progress report carries at most per series (the live view's; files keep all). */
    static final int REPORT_VALUES = 2048;
    final Plan plan;
    final Events events;
    final Control control;

    Role(Plan plan, Events events, Control control) {
        this.plan = plan;
        this.events = events;
        this.control = control;
    }

    abstract void run() throws Exception;

    /** Messages handled so far (sent, or received). */
    abstract long handled();

    /** Messages waiting for this worker that it has not taken yet; -1 when it cannot tell. */
    abstract long backlog();

    /** A progress event with what happened since the last one. */
    abstract void progress();

    /** Threads every message passes through (their OS names), for the saturation verdict. */
    abstract String[] messageThreads();

    /** `own` and the client's threads on the message path. */
    static String[] with(String own, String[] client) {
        String[] all = java.util.Arrays.copyOf(client, client.length + 1);
        all[client.length] = own;
        return all;
    }

    /** For threads that spin by design: nanoseconds each spent on messages (not on polling an empty route). */
    abstract Map<String, Long> work();

    void ready(long messages) {
        events.emit(Events.event("ready", plan).field("messages", messages));
    }
}
