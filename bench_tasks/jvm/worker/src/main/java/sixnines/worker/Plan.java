package sixnines.worker;

import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;

/**
 * What the driving process asks of this worker (docs/workers.md, "The plan"): a properties file, one key=value per
 * line, written by bench_tasks.load.contract. Every key this worker needs must be there: a missing one is an error
 * that names it, never a silent default.
 */
final class Plan {
    private final Properties props;

    private Plan(Properties props) {
        this.props = props;
    }

    static Plan read(Path file) throws IOException {
        Properties props = new Properties();
        try (Reader in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            props.load(in);
        }
        return new Plan(props);
    }

    String text(String key) {
        String value = props.getProperty(key);
        if (value == null) {
            throw new IllegalArgumentException("plan: missing key " + key);
        }
        return value;
    }

    String text(String key, String fallback) {
        return props.getProperty(key, fallback);
    }

    long number(String key) {
        String value = text(key);
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("plan: " + key + "=" + value + " is not an integer");
        }
    }

    double decimal(String key) {
        String value = text(key);
        try {
            return Double.parseDouble(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("plan: " + key + "=" + value + " is not a number");
        }
    }

    /** Every key under a prefix ("kafka.producer."), prefix removed: native client settings passed through. */
    Properties under(String prefix) {
        Properties out = new Properties();
        for (String key : props.stringPropertyNames()) {
            if (key.startsWith(prefix)) {
                out.setProperty(key.substring(prefix.length()), props.getProperty(key));
            }
        }
        return out;
    }

    String role() {
        return text("role");
    }

    int index() {
        return (int) number("index");
    }

    /** How the cell's records name this worker: `producer p0`, `consumer c1` (bench_tasks.load.contract). */
    String name() {
        return text("name");
    }

    Path scratch() {
        return Path.of(text("scratch"));
    }

    long phaseEndNs(long t0) {
        return t0 + number("warmup_ns") + number("measure_ns") + number("cooldown_ns");
    }

    long measureStartNs(long t0) {
        return t0 + number("warmup_ns");
    }

    long measureEndNs(long t0) {
        return measureStartNs(t0) + number("measure_ns");
    }
}
