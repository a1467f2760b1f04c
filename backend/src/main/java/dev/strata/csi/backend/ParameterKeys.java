package dev.strata.csi.backend;

import dev.strata.csi.rpc.CsiException;
import java.util.Collections;
import java.util.Comparator;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * The keys one map of a request may hold for one backend: Kubernetes' own ({@link KubernetesKeys}),
 * those an administrator may set, and in a volume_context those the driver's own CreateVolume
 * answered. Any other key is refused (INVALID_ARGUMENT) with the keys an administrator may set and
 * the one it looks like a misspelling of: a typo in a StorageClass fails loudly instead of being
 * dropped. Only keys go into the message, never a value (a volume_context may carry tokens).
 *
 * @param request       which map
 * @param owner         what the map is for, in a message: "a local volume", "an NFS snapshot"
 * @param administrator the keys an administrator may set
 * @param driver        the keys only the driver writes (a volume_context's, from CreateVolume)
 */
public record ParameterKeys(KubernetesKeys.Request request, String owner, Set<String> administrator, Set<String> driver) {

    /** Edits (Levenshtein) a key may be away from a known one to be called a misspelling of it, for keys of 6 characters or more. */
    private static final int MAX_EDITS = 2;

    /** Keys longer than this are not compared with the known ones: no misspelling is that long. */
    private static final int MAX_COMPARED = 64;

    /** The administrator's keys kept in order, for the message. */
    public ParameterKeys {
        administrator = Collections.unmodifiableSortedSet(new TreeSet<>(administrator));
        driver = Set.copyOf(driver);
    }

    /** Whether the map may hold the key. */
    public boolean known(String key) {
        return administrator.contains(key) || driver.contains(key) || request.fromKubernetes(key);
    }

    /** Why the map would be refused (its first unknown key, in order), or empty when every key is known. */
    public Optional<String> problem(Map<String, String> map) {
        return new TreeSet<>(map.keySet()).stream().filter(key -> !known(key)).findFirst().map(this::refusal);
    }

    /** INVALID_ARGUMENT for a map with a key nobody sets. */
    public void require(Map<String, String> map) {
        problem(map).ifPresent(problem -> {
            throw CsiException.invalidArgument(problem);
        });
    }

    private String refusal(String key) {
        return "unknown " + request.described() + " '" + CsiException.printable(key) + "' for " + owner
                + misspelt(key).map(known -> " (did you mean " + known + "?)").orElse("")
                + "; an administrator may set" + (administrator.isEmpty() ? " none" : ": " + String.join(", ", administrator))
                + "; keys under " + KubernetesKeys.PREFIX + " are Kubernetes' own";
    }

    /** The known key this one looks like a misspelling of: the same but for case, or at most two edits away. */
    Optional<String> misspelt(String key) {
        Set<String> candidates = new TreeSet<>(administrator);
        candidates.addAll(driver);
        if (request == KubernetesKeys.Request.CREATE_VOLUME) {
            candidates.add(KubernetesKeys.FS_TYPE);
        }
        if (key.length() > MAX_COMPARED) {
            return Optional.empty();
        }
        String typed = key.toLowerCase(Locale.ROOT);
        return candidates.stream()
                .filter(candidate -> edits(typed, candidate) <= Math.min(MAX_EDITS, lastSegment(candidate).length() / 3))
                .min(Comparator.comparingInt((String candidate) -> edits(typed, candidate)).thenComparing(Comparator.naturalOrder()));
    }

    /** The fewer edits to the candidate as a whole or to its last segment (a prefixed key typed without its prefix). */
    private static int edits(String typed, String candidate) {
        String known = candidate.toLowerCase(Locale.ROOT);
        return Math.min(distance(typed, known), distance(typed, lastSegment(known)));
    }

    private static String lastSegment(String key) {
        return key.substring(key.lastIndexOf('/') + 1);
    }

    /** Levenshtein distance: insertions, deletions and substitutions. */
    static int distance(String a, String b) {
        int[] previous = new int[b.length() + 1];
        int[] current = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            previous[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            current[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int substitution = previous[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
            }
            int[] swap = previous;
            previous = current;
            current = swap;
        }
        return previous[b.length()];
    }
}
