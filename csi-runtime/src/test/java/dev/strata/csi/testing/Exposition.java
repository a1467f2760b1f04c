package dev.strata.csi.testing;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A scrape of {@code /metrics}, parsed as Prometheus parses the text format (version 0.0.4):
 * {@code # HELP} and {@code # TYPE} lines, then samples {@code name{label="value",...} value}
 * with escaped label values. Anything else fails the parse, and so do the rules a histogram
 * obeys (cumulative buckets, a {@code +Inf} bucket equal to {@code _count}).
 */
public record Exposition(Map<String, String> types, List<Sample> samples) {

    public record Sample(String name, Map<String, String> labels, double value) {}

    /** Scrapes {@code http://address/metrics}; the answer must be 200 with the text format's content type. */
    public static Exposition scrape(String address) throws IOException, InterruptedException {
        HttpResponse<String> response = get(address, "/metrics");
        if (response.statusCode() != 200) {
            throw new AssertionError("/metrics answered " + response.statusCode() + ": " + response.body());
        }
        String type = response.headers().firstValue("Content-Type").orElse("");
        if (!type.startsWith("text/plain; version=0.0.4")) {
            throw new AssertionError("/metrics has content type '" + type + "'");
        }
        return parse(response.body());
    }

    /** The status code of {@code GET http://address/healthz}, or empty while nothing listens. */
    public static Optional<Integer> healthz(String address) throws InterruptedException {
        try {
            return Optional.of(get(address, "/healthz").statusCode());
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    private static HttpResponse<String> get(String address, String path) throws IOException, InterruptedException {
        try (HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()) {
            return client.send(HttpRequest.newBuilder(URI.create("http://" + address + path)).timeout(Duration.ofSeconds(10)).build(),
                    HttpResponse.BodyHandlers.ofString());
        }
    }

    public static Exposition parse(String text) {
        Map<String, String> types = new HashMap<>();
        List<Sample> samples = new ArrayList<>();
        int lineNumber = 0;
        for (String line : text.split("\n", -1)) {
            lineNumber++;
            if (line.isEmpty()) {
                continue;
            }
            if (line.startsWith("# TYPE ")) {
                String[] parts = line.substring(7).split(" ");
                if (parts.length != 2 || !List.of("counter", "gauge", "histogram", "summary", "untyped").contains(parts[1])) {
                    throw new AssertionError("line " + lineNumber + ": bad TYPE: " + line);
                }
                types.put(parts[0], parts[1]);
            } else if (line.startsWith("# HELP ") || line.startsWith("#")) {
                continue;
            } else {
                samples.add(sample(line, lineNumber));
            }
        }
        Exposition exposition = new Exposition(Map.copyOf(types), List.copyOf(samples));
        exposition.checkHistograms();
        return exposition;
    }

    private static Sample sample(String line, int lineNumber) {
        int i = 0;
        while (i < line.length() && (Character.isLetterOrDigit(line.charAt(i)) || line.charAt(i) == '_' || line.charAt(i) == ':')) {
            i++;
        }
        String name = line.substring(0, i);
        if (name.isEmpty() || Character.isDigit(name.charAt(0))) {
            throw new AssertionError("line " + lineNumber + ": no metric name: " + line);
        }
        Map<String, String> labels = new LinkedHashMap<>();
        if (i < line.length() && line.charAt(i) == '{') {
            i++;
            while (line.charAt(i) != '}') {
                int eq = line.indexOf('=', i);
                String label = line.substring(i, eq);
                if (!label.matches("[a-zA-Z_][a-zA-Z0-9_]*") || line.charAt(eq + 1) != '"') {
                    throw new AssertionError("line " + lineNumber + ": bad label at " + i + ": " + line);
                }
                StringBuilder value = new StringBuilder();
                int j = eq + 2;
                for (; line.charAt(j) != '"'; j++) {
                    char c = line.charAt(j);
                    if (c == '\\') {
                        char escaped = line.charAt(++j);
                        value.append(switch (escaped) {
                            case 'n' -> '\n';
                            case '\\' -> '\\';
                            case '"' -> '"';
                            default -> throw new AssertionError("line " + lineNumber + ": bad escape: " + line);
                        });
                    } else {
                        value.append(c);
                    }
                }
                if (labels.put(label, value.toString()) != null) {
                    throw new AssertionError("line " + lineNumber + ": label " + label + " twice: " + line);
                }
                i = j + 1;
                if (line.charAt(i) == ',') {
                    i++;
                }
            }
            i++;
        }
        String[] rest = line.substring(i).trim().split(" ");
        if (line.charAt(i) != ' ' || rest.length < 1 || rest.length > 2) {
            throw new AssertionError("line " + lineNumber + ": bad value: " + line);
        }
        double value = switch (rest[0]) {
            case "+Inf" -> Double.POSITIVE_INFINITY;
            case "-Inf" -> Double.NEGATIVE_INFINITY;
            case "NaN" -> Double.NaN;
            default -> Double.parseDouble(rest[0]);
        };
        return new Sample(name, Map.copyOf(labels), value);
    }

    private void checkHistograms() {
        types.forEach((family, type) -> {
            if (!type.equals("histogram")) {
                return;
            }
            Map<Map<String, String>, List<Sample>> buckets = new LinkedHashMap<>();
            for (Sample sample : samples) {
                if (sample.name().equals(family + "_bucket")) {
                    Map<String, String> series = new HashMap<>(sample.labels());
                    series.remove("le");
                    buckets.computeIfAbsent(series, s -> new ArrayList<>()).add(sample);
                }
            }
            buckets.forEach((series, list) -> {
                double previous = 0;
                double previousBound = Double.NEGATIVE_INFINITY;
                for (Sample bucket : list) {
                    double bound = Double.parseDouble(bucket.labels().get("le").replace("+Inf", "Infinity"));
                    if (bound <= previousBound || bucket.value() < previous) {
                        throw new AssertionError(family + " " + series + ": buckets not cumulative: " + list);
                    }
                    previous = bucket.value();
                    previousBound = bound;
                }
                if (previousBound != Double.POSITIVE_INFINITY || previous != value(family + "_count", series)) {
                    throw new AssertionError(family + " " + series + ": +Inf bucket differs from _count");
                }
            });
        });
    }

    /** The value of the one sample of {@code name} with exactly these labels; fails when there is none. */
    public double value(String name, Map<String, String> labels) {
        return find(name, labels).orElseThrow(() -> new AssertionError("no sample " + name + labels + " in:\n" + this));
    }

    public Optional<Double> find(String name, Map<String, String> labels) {
        return samples.stream().filter(s -> s.name().equals(name) && s.labels().equals(labels)).map(Sample::value).findFirst();
    }

    /** Every sample of {@code name}. */
    public List<Sample> all(String name) {
        return samples.stream().filter(s -> s.name().equals(name)).toList();
    }

    /** The bucket bounds of a histogram series, as written. */
    public List<String> bounds(String family, Map<String, String> series) {
        return samples.stream()
                .filter(s -> s.name().equals(family + "_bucket"))
                .filter(s -> {
                    Map<String, String> rest = new HashMap<>(s.labels());
                    rest.remove("le");
                    return rest.equals(series);
                })
                .map(s -> s.labels().get("le"))
                .toList();
    }

    @Override
    public String toString() {
        StringBuilder out = new StringBuilder();
        samples.forEach(s -> out.append(s.name()).append(s.labels()).append(' ').append(s.value()).append('\n'));
        return out.toString();
    }
}
