package sixnines.jlbh;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import net.openhft.chronicle.bytes.Bytes;
import net.openhft.chronicle.core.util.NanoSampler;
import net.openhft.chronicle.jlbh.JLBH;
import net.openhft.chronicle.jlbh.JLBHOptions;
import net.openhft.chronicle.jlbh.JLBHResult;
import net.openhft.chronicle.jlbh.JLBHResultConsumer;
import net.openhft.chronicle.jlbh.JLBHTask;
import net.openhft.chronicle.queue.ChronicleQueue;
import net.openhft.chronicle.queue.ExcerptAppender;
import net.openhft.chronicle.queue.ExcerptTailer;
import net.openhft.chronicle.queue.RollCycles;
import net.openhft.chronicle.threads.Pauser;
import net.openhft.chronicle.wire.DocumentContext;

/**
 * JLBH (Chronicle's latency harness) timing one hop through a Chronicle Queue, the native side of
 * bench/native_chronicle.py: JLBH calls {@link #run} at each intended time (it accounts for coordinated omission, so
 * its start time is the schedule's, not the late call's); the task stamps the send right before the append, as the
 * sixnines worker does, and a reader thread tails the queue with the same wait strategy, stamping each message once
 * it is copied out. End to end is sampled from JLBH's start time; the "from sent" probe from the send stamp. One JSON
 * line on stdout carries both, in nanoseconds.
 *
 * <pre>java … sixnines.jlbh.QueueHop QUEUE_DIR ROLL_CYCLE busy|pauser SIZE RATE WARMUP_S MEASURE_S</pre>
 */
public final class QueueHop implements JLBHTask {
    private static final int INTENDED = 0;
    private static final int SENT = 8;
    private final ChronicleQueue queue;
    private final boolean spin;
    private final int size;
    private final ByteBuffer out;
    private ExcerptAppender appender;
    private JLBH jlbh;
    private NanoSampler fromSent;
    private final CountDownLatch tailing = new CountDownLatch(1);
    private volatile boolean done;
    private Thread reader;

    QueueHop(ChronicleQueue queue, boolean spin, int size) {
        this.queue = queue;
        this.spin = spin;
        this.size = size;
        this.out = ByteBuffer.wrap(new byte[size]).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Override
    public void init(JLBH jlbh) {
        this.jlbh = jlbh;
        this.fromSent = jlbh.addProbe("from sent");
        this.appender = queue.createAppender();
        reader = new Thread(this::read, "jlbh-reader");
        reader.setDaemon(true);
        reader.start();
        try {
            tailing.await(); // the first message is sent once the tailer is at the end, or it would be missed
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted before the reader was tailing", e);
        }
    }

    @Override
    public void run(long startTimeNs) {
        out.putLong(INTENDED, startTimeNs);
        long sent = System.nanoTime();
        out.putLong(SENT, sent);
        try (DocumentContext dc = appender.writingDocument()) {
            dc.wire().bytes().write(out.array(), 0, size);
        }
    }

    /** Tail the queue: wait by the strategy when it is empty, stamp each message once copied, sample it. */
    private void read() {
        ExcerptTailer tailer = queue.createTailer().toEnd(); // a tailer belongs to the thread that uses it
        tailing.countDown();
        Pauser pauser = spin ? Pauser.busy() : Pauser.balanced();
        ByteBuffer in = ByteBuffer.wrap(new byte[size]).order(ByteOrder.LITTLE_ENDIAN);
        while (!done) {
            boolean got = false;
            try (DocumentContext dc = tailer.readingDocument()) {
                if (dc.isPresent() && !dc.isMetaData()) {
                    Bytes<?> bytes = dc.wire().bytes();
                    bytes.read(in.array(), 0, (int) Math.min(bytes.readRemaining(), size));
                    got = true;
                }
            }
            if (!got) {
                pauser.pause();
                continue;
            }
            long received = System.nanoTime();
            pauser.reset();
            jlbh.sample(received - in.getLong(INTENDED));
            fromSent.sampleNanos(received - in.getLong(SENT));
        }
    }

    @Override
    public void complete() {
        done = true;
    }

    public static void main(String[] args) throws Exception {
        Path dir = Path.of(args[0]);
        String wait = args[2];
        int size = Integer.parseInt(args[3]);
        int rate = Integer.parseInt(args[4]);
        int warmup = (int) Math.round(rate * Double.parseDouble(args[5]));
        long measure = Math.round(rate * Double.parseDouble(args[6]));
        JLBHResultConsumer results = JLBHResultConsumer.newThreadSafeInstance();
        try (ChronicleQueue queue = ChronicleQueue.singleBuilder(dir).rollCycle(RollCycles.valueOf(args[1])).build()) {
            JLBHOptions options = new JLBHOptions()
                .throughput(rate, TimeUnit.SECONDS)
                .warmUpIterations(warmup)
                .iterations(measure)
                .runs(1)
                .skipFirstRun(false)
                .pauseAfterWarmupMS(0)
                .recordOSJitter(false) // its monitor is one more spinning thread on a small host
                .accountForCoordinatedOmission(true)
                .timeout(10_000) // ms without a sample: the run is abandoned, never left hanging
                .jlbhTask(new QueueHop(queue, wait.equals("busy"), size));
            new JLBH(options, System.err, results).start();
        }
        System.out.println(json(results.get(), measure));
    }

    private static String json(JLBHResult result, long count) {
        StringBuilder s = new StringBuilder("{\"count\": ").append(count);
        s.append(", \"end_to_end_ns\": ");
        append(s, result.endToEnd().summaryOfLastRun().percentiles());
        s.append(", \"from_sent_ns\": ");
        append(s, result.probe("from sent").orElseThrow().summaryOfLastRun().percentiles());
        return s.append('}').toString();
    }

    private static void append(StringBuilder s, Map<JLBHResult.RunResult.Percentile, Duration> percentiles) {
        s.append('{');
        String comma = "";
        for (Map.Entry<JLBHResult.RunResult.Percentile, Duration> e : percentiles.entrySet()) {
            s.append(comma).append('"').append(e.getKey().name()).append("\": ").append(e.getValue().toNanos());
            comma = ", ";
        }
        s.append('}');
    }
}
