package dev.strata.csi.deploy;

import java.util.List;
import java.util.Map;

/** Reads SnakeYAML's tree of maps and lists by path; a missing step gives null or an empty collection. */
final class Tree {

    private Tree() {}

    static Object at(Object node, String... path) {
        Object current = node;
        for (String key : path) {
            if (!(current instanceof Map<?, ?> map)) {
                return null;
            }
            current = map.get(key);
        }
        return current;
    }

    static String string(Object node, String... path) {
        Object value = at(node, path);
        return value == null ? null : String.valueOf(value);
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> map(Object node, String... path) {
        return at(node, path) instanceof Map<?, ?> map ? (Map<String, Object>) map : Map.of();
    }

    @SuppressWarnings("unchecked")
    static List<Object> list(Object node, String... path) {
        return at(node, path) instanceof List<?> list ? (List<Object>) list : List.of();
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> maps(Object node, String... path) {
        return list(node, path).stream().filter(Map.class::isInstance).map(item -> (Map<String, Object>) item).toList();
    }

    static List<String> strings(Object node, String... path) {
        return list(node, path).stream().map(String::valueOf).toList();
    }
}
