package sixnines.worker;

import com.sun.management.OperatingSystemMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;

/**
 * The worker watching itself (docs/workers.md, "Self-facts"; bench_tasks/core/saturation.py judges): every report
 * period a `sample` event with every thread's run and runnable-wait times from /proc/self/task/{tid}/schedstat
 * (same-named threads added), the process's CPU time, the role's backlog and handled count, and, for threads that
 * spin by design, the time they spent on messages; then the role's `progress` event.
 */
final class SelfWatch implements Runnable {
    private static final Path TASKS = Path.of("/proc/self/task");
    private final Role role;
    private final Events events;
    private final long periodMs;
    private final OperatingSystemMXBean os =
        (OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
    private volatile boolean running = true;
    private Thread thread;

    SelfWatch(Role role, Events events, long periodMs) {
        this.role = role;
        this.events = events;
        this.periodMs = periodMs;
    }

    SelfWatch start() {
        thread = new Thread(this, "watch");
        thread.setDaemon(true);
        thread.start();
        return this;
    }

    @Override
    public void run() {
        while (running) {
            try {
                Thread.sleep(periodMs);
            } catch (InterruptedException e) {
                return;
            }
            report();
        }
    }

    /** One sample and one progress report (also called once more at the end by the main thread). */
    synchronized void report() {
        sample();
        role.progress();
    }

    void stop() throws InterruptedException {
        running = false;
        thread.interrupt();
        thread.join(1000);
    }

    private void sample() {
        Json threads = new Json();
        for (Map.Entry<String, long[]> t : threads().entrySet()) {
            long[] v = t.getValue();
            threads.raw(t.getKey(), "[" + v[0] + "," + v[1] + "," + v[2] + "]");
        }
        Json work = new Json();
        role.work().forEach(work::field);
        events.emit(Events.event("sample", role.plan).field("at_ns", System.nanoTime())
            .field("cpu_ns", os.getProcessCpuTime()).field("backlog", role.backlog())
            .field("handled", role.handled()).field("threads", threads).field("work", work)
            .field("message_threads", role.messageThreads()));
    }

    /** Thread name -> {run_ns, wait_ns, slices}, same-named threads added. */
    static Map<String, long[]> threads() {
        Map<String, long[]> out = new TreeMap<>();
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(TASKS)) {
            for (Path task : tasks) {
                try {
                    String name = Files.readString(task.resolve("comm"), StandardCharsets.UTF_8).strip();
                    String[] f = Files.readString(task.resolve("schedstat"), StandardCharsets.UTF_8).strip().split(" ");
                    long[] seen = out.computeIfAbsent(name, k -> new long[3]);
                    for (int i = 0; i < 3; i++) {
                        seen[i] += Long.parseLong(f[i]);
                    }
                } catch (IOException | RuntimeException e) {
                    // the thread ended between listing and reading
                }
            }
        } catch (IOException e) {
            // /proc not readable: an empty sample says so
        }
        return out;
    }
}
