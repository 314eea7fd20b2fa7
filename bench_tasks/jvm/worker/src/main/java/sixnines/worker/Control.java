package sixnines.worker;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

/**
 * The driving process's commands, one per line on stdin (docs/workers.md, "Commands"): `start <t0_ns>` when the
 * schedule's t0 is fixed for every producer, `stop` when the worker should finish (listeners: the drain is over;
 * producers: the cell was cut off). End of input means the driving process is gone: the worker then exits at
 * once, so no worker outlives the cell that started it.
 */
final class Control implements Runnable {
    static final int ORPHANED_EXIT = 3;
    private volatile long t0Ns;
    private volatile boolean stopped;

    static Control listen() {
        Control control = new Control();
        Thread thread = new Thread(control, "control");
        thread.setDaemon(true);
        thread.start();
        return control;
    }

    @Override
    public void run() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] words = line.trim().split(" ");
                switch (words[0]) {
                    case "start" -> t0Ns = Long.parseLong(words[1]);
                    case "stop" -> stopped = true;
                    case "" -> { }
                    default -> System.err.println("unknown command: " + line);
                }
            }
        } catch (IOException | RuntimeException e) {
            System.err.println("control: " + e);
        }
        Runtime.getRuntime().halt(ORPHANED_EXIT);
    }

    boolean stopped() {
        return stopped;
    }

    long t0Ns() {
        return t0Ns;
    }

    /** t0, once the driving process has fixed it (it is never 0 on CLOCK_MONOTONIC); throws if stopped first. */
    long awaitStart() throws InterruptedException {
        while (t0Ns == 0) {
            if (stopped) {
                throw new IllegalStateException("stopped before start");
            }
            Thread.sleep(1);
        }
        return t0Ns;
    }
}
