package sixnines.worker;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The open loop (docs/workers.md; DESIGN "Measurement rules"): message i is intended at t0 + offset[i], the
 * offsets being the driving process's schedule (bench_tasks/core/schedule.py, the one definition), read from the
 * plan's schedule file. The worker never waits for the system before the next send: behind schedule it sends at
 * once and the message keeps its intended time. Each message is built before the wait, its send time stamped
 * right before the library call and its acknowledgement right after it returns (a synchronous append), or the
 * moment the client calls back (an asynchronous send: Kafka's delivery callback, on the client's I/O thread).
 */
final class Producer extends Role implements Transport.Acks {
    private static final long PARK_LEAD_NS = 50_000; // parking wakes this much before the intended time, then spins
    private final Transport transport;
    private final long[] offsets;
    private final long[] sent;
    private final long[] acked;
    private final long[] offset;
    private final long[] partition;
    private final boolean[] refused;
    private final AtomicLong ackCount = new AtomicLong();
    private int ackScan; // progress: every message below this one is acknowledged or refused, and was reported
    private final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    private final String wait;
    private volatile long t0;
    private volatile int attempted;
    private int reported;
    private final Fresh lag = new Fresh(Role.REPORT_VALUES);
    private final Fresh ackIntended = new Fresh(Role.REPORT_VALUES);
    private final Fresh ackSent = new Fresh(Role.REPORT_VALUES);
    private final Fresh ackAt = new Fresh(Role.REPORT_VALUES);

    Producer(Plan plan, Events events, Control control, Transport transport) throws IOException {
        super(plan, events, control);
        this.transport = transport;
        this.offsets = readSchedule(Path.of(plan.text("schedule")));
        int n = offsets.length;
        this.sent = filled(n);
        this.acked = filled(n);
        this.offset = filled(n);
        this.partition = filled(n);
        this.refused = new boolean[n];
        this.wait = plan.text("wait");
        if (!wait.equals("park") && !wait.equals("spin") && !wait.equals("sleep")) {
            throw new IllegalArgumentException("plan: wait=" + wait + " is not park, spin or sleep");
        }
    }

    private static long[] filled(int n) {
        long[] a = new long[n];
        java.util.Arrays.fill(a, -1L);
        return a;
    }

    /** The schedule file: every intended offset from t0 as a little-endian int64, sorted. */
    static long[] readSchedule(Path file) throws IOException {
        try (FileChannel in = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = in.size();
            if (size % 8 != 0 || size / 8 > Integer.MAX_VALUE) {
                throw new IOException("schedule " + file + ": " + size + " bytes is not a whole number of int64s");
            }
            ByteBuffer buf = in.map(FileChannel.MapMode.READ_ONLY, 0, size).order(ByteOrder.LITTLE_ENDIAN);
            long[] out = new long[(int) (size / 8)];
            buf.asLongBuffer().get(out);
            return out;
        }
    }

    @Override
    void run() throws Exception {
        int size = (int) plan.number("message_size_bytes");
        ByteBuffer buf = ByteBuffer.wrap(new byte[size]).order(ByteOrder.LITTLE_ENDIAN);
        SplittableRandom random = new SplittableRandom();
        int pid = plan.index();
        try (Transport.Sender sender = transport.sender(plan.text("route"), "sixnines-p" + pid)) {
            boolean acks = sender.acknowledgedOnReturn();
            ready(offsets.length);
            t0 = control.awaitStart();
            for (int i = 0; i < offsets.length && !control.stopped(); i++) {
                long intended = t0 + offsets[i];
                Message.prepare(buf, random, pid, i, intended);
                waitUntil(intended);
                long s = System.nanoTime();
                Message.stampSent(buf, s);
                try {
                    long at = sender.send(buf, size, i, this);
                    long a = System.nanoTime();
                    sent[i] = s;
                    if (acks) {
                        offset[i] = at;
                        acked[i] = a;
                        ackCount.incrementAndGet();
                    }
                } catch (Exception e) {
                    refuse(i, e);
                }
                attempted = i + 1;
            }
        }
        Path scratch = plan.scratch();
        String name = "sent-p" + pid;
        RawFile.write(scratch.resolve(name + ".s9raw"), "sent",
            new String[] {"seq", "intended_ns", "sent_ns", "acked_ns", "partition", "offset"}, columns());
        if (!errors.isEmpty()) {
            RawFile.writeErrors(scratch.resolve(name + ".errors"), errors);
        }
    }

    /** An asynchronous acknowledgement: stamped first, on the client's thread, the moment it calls back. */
    @Override
    public void acked(int seq, int at, long where, Exception error) {
        long a = System.nanoTime();
        if (error != null) {
            refuse(seq, error);
            return;
        }
        partition[seq] = at;
        offset[seq] = where;
        acked[seq] = a;
        ackCount.incrementAndGet();
    }

    private void refuse(int seq, Exception error) {
        refused[seq] = true;
        errors.add(seq + "\t" + error);
    }

    /** park: sleep, then spin the last 50 µs; spin: never sleep; sleep: never spin (the kernel's timer slack, tens
     *  of microseconds, is then send lag, and the message keeps its intended time). */
    private void waitUntil(long intended) {
        long now;
        while ((now = System.nanoTime()) < intended) {
            long ahead = intended - now;
            if (wait.equals("sleep")) {
                LockSupport.parkNanos(ahead);
            } else if (wait.equals("park") && ahead > 2 * PARK_LEAD_NS) {
                LockSupport.parkNanos(ahead - PARK_LEAD_NS);
            } else {
                Thread.onSpinWait();
            }
        }
    }

    private Columns columns() {
        int n = attempted;
        Columns cols = new Columns(6, n);
        for (int i = 0; i < offsets.length; i++) {
            cols.next();
            cols.set(0, i);
            cols.set(1, t0 + offsets[i]);
            cols.set(2, i < n ? sent[i] : -1);
            cols.set(3, i < n ? acked[i] : -1);
            cols.set(4, i < n ? partition[i] : -1);
            cols.set(5, i < n ? offset[i] : -1);
            cols.commit();
        }
        return cols;
    }

    @Override
    long handled() {
        return attempted;
    }

    @Override
    long backlog() {
        return -1;
    }

    @Override
    String[] messageThreads() {
        return transport.clientThreads(); // the sending thread's every delay is measured exactly, as send lag
    }

    @Override
    Map<String, Long> work() {
        return Map.of();
    }

    /**
     * Fresh send lags of the messages sent since the last report, and fresh acknowledgements: those of the messages
     * from the first one not yet reported up to the first still awaiting its acknowledgement (an asynchronous
     * client acknowledges out of order across partitions; no value is reported twice).
     */
    @Override
    synchronized void progress() {
        long ackedTotal = ackCount.get();
        int end = attempted;
        int start = reported;
        reported = end;
        lag.reset();
        ackIntended.reset();
        ackSent.reset();
        ackAt.reset();
        long step = Fresh.step(end - start);
        int worstLag = -1;
        long base = t0;
        for (int i = start; i < end; i++) {
            if (sent[i] >= 0 && (worstLag < 0 || sent[i] - offsets[i] > sent[worstLag] - offsets[worstLag])) {
                worstLag = i;
            }
            if (sent[i] >= 0 && (i - start) % step == 0) {
                lag.add(sent[i] - base - offsets[i]);
            }
        }
        if (worstLag >= 0) {
            lag.add(sent[worstLag] - base - offsets[worstLag]);
        }
        reportAcks(end, base);
        events.emit(Events.event("progress", plan).field("attempted", end).field("acked", ackedTotal)
            .field("errors", errors.size()).field("lag_ns", lag.values, lag.count)
            .field("ack_intended_ns", ackIntended.values, ackIntended.count)
            .field("ack_sent_ns", ackSent.values, ackSent.count).field("ack_at_ns", ackAt.values, ackAt.count));
    }

    private void reportAcks(int end, long base) {
        int start = ackScan;
        int stop = start;
        while (stop < end && (acked[stop] >= 0 || refused[stop])) {
            stop++;
        }
        ackScan = stop;
        long step = Fresh.step(stop - start);
        int worst = -1;
        for (int i = start; i < stop; i++) {
            if (acked[i] < 0) {
                continue;
            }
            if (worst < 0 || acked[i] - offsets[i] > acked[worst] - offsets[worst]) {
                worst = i;
            }
            if ((i - start) % step == 0) {
                addAck(i, base);
            }
        }
        if (worst >= 0) {
            addAck(worst, base);
        }
    }

    private void addAck(int i, long base) {
        long intended = base + offsets[i];
        ackIntended.add(acked[i] - intended);
        ackSent.add(acked[i] - sent[i]);
        ackAt.add(intended);
    }
}
