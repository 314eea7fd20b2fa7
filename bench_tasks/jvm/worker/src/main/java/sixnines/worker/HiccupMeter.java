package sixnines.worker;

import java.util.concurrent.locks.LockSupport;

/**
 * Moments this process could not run (after jHiccup): a thread asks to wake every millisecond and records each
 * wake-up that came late by at least a millisecond, with when the lateness began. A worker stopped (SIGSTOP),
 * throttled by a CPU share, starved by the host, or held at a JVM safepoint (a GC pause) shows up here whatever
 * it was doing, so the driving process can fail a cell whose worker paused past `max_schedule_lag_ms`
 * (bench_tasks/core/saturation.py). Stored in fixed arrays: the meter allocates nothing while it runs.
 */
final class HiccupMeter implements Runnable {
    static final long TICK_NS = 1_000_000;
    static final long RECORD_FROM_NS = 1_000_000;
    private final long[] at;
    private final long[] late;
    private volatile int count;
    private volatile boolean running = true;

    HiccupMeter(int capacity) {
        at = new long[capacity];
        late = new long[capacity];
    }

    static HiccupMeter start(int capacity) {
        HiccupMeter meter = new HiccupMeter(capacity);
        Thread thread = new Thread(meter, "hiccup");
        thread.setDaemon(true);
        thread.start();
        return meter;
    }

    @Override
    public void run() {
        long due = System.nanoTime() + TICK_NS;
        while (running) {
            LockSupport.parkNanos(due - System.nanoTime());
            long now = System.nanoTime();
            if (now - due >= RECORD_FROM_NS) {
                int n = count;
                if (n < at.length) {
                    at[n] = due;
                    late[n] = now - due;
                    count = n + 1;
                }
            }
            due = Math.max(due + TICK_NS, now + TICK_NS / 2);
        }
    }

    void stop() {
        running = false;
    }

    /** [[start_ns, late_ns], ...] of the hiccups that began in [from, to). */
    String within(long from, long to) {
        StringBuilder out = new StringBuilder("[");
        int n = count;
        boolean first = true;
        for (int i = 0; i < n; i++) {
            if (at[i] >= from && at[i] < to) {
                out.append(first ? "" : ",").append('[').append(at[i]).append(',').append(late[i]).append(']');
                first = false;
            }
        }
        return out.append(']').toString();
    }

    boolean full() {
        return count == at.length;
    }
}
