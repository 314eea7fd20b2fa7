package sixnines.worker;

/**
 * A progress report's latencies: at most {@link Role#REPORT_VALUES} of the fresh values, every k-th one plus the
 * largest, so the live view's percentiles and running max stay right while a report stays small at 500,000 msg/s.
 * The sample files keep every value.
 */
final class Fresh {
    final long[] values;
    int count;

    Fresh(int capacity) {
        values = new long[capacity + 1];
    }

    /** Step that keeps at most REPORT_VALUES of `n` values. */
    static long step(long n) {
        return Math.max(1, (n + Role.REPORT_VALUES - 1) / Role.REPORT_VALUES);
    }

    void reset() {
        count = 0;
    }

    void add(long value) {
        if (count < values.length) {
            values[count++] = value;
        }
    }
}
