package sixnines.worker;

import java.util.Map;

/** A JSON object written field by field: all the worker ever writes (numbers, strings, arrays of longs). */
final class Json {
    private final StringBuilder text = new StringBuilder(256).append('{');
    private boolean first = true;

    private StringBuilder key(String name) {
        if (!first) {
            text.append(',');
        }
        first = false;
        return quote(text, name).append(':');
    }

    Json field(String name, long value) {
        key(name).append(value);
        return this;
    }

    Json field(String name, double value) {
        key(name).append(Double.isFinite(value) ? Double.toString(value) : "null");
        return this;
    }

    Json field(String name, boolean value) {
        key(name).append(value);
        return this;
    }

    Json field(String name, String value) {
        if (value == null) {
            key(name).append("null");
        } else {
            quote(key(name), value);
        }
        return this;
    }

    Json field(String name, Json value) {
        key(name).append(value.end());
        return this;
    }

    Json field(String name, long[] values, int count) {
        StringBuilder out = key(name).append('[');
        for (int i = 0; i < count; i++) {
            if (i > 0) {
                out.append(',');
            }
            out.append(values[i]);
        }
        out.append(']');
        return this;
    }

    Json field(String name, String[] values) {
        StringBuilder out = key(name).append('[');
        for (int i = 0; i < values.length; i++) {
            if (i > 0) {
                out.append(',');
            }
            quote(out, values[i]);
        }
        out.append(']');
        return this;
    }

    Json counts(String name, Map<String, Long> counts) {
        Json inner = new Json();
        counts.forEach(inner::field);
        return field(name, inner);
    }

    Json raw(String name, String json) {
        key(name).append(json);
        return this;
    }

    String end() {
        return text.toString() + '}';
    }

    private static StringBuilder quote(StringBuilder out, String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"');
    }
}
