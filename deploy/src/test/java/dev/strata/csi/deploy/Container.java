package dev.strata.csi.deploy;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** One container of a pod template, with its flags read from args as {@code --name=value} or {@code --name}. */
record Container(Map<String, Object> body) {

    /** A flag as written in args; {@code value} is null for a bare {@code --name}. */
    record Arg(String name, String value) {}

    /** A volume mount. */
    record Mount(String volume, String path, String propagation, boolean readOnly) {}

    /** A probe's target: the port as written (a name or a number) and the kind of probe. */
    record ProbePort(String probe, Object port) {}

    String name() {
        return Tree.string(body, "name");
    }

    String image() {
        return Tree.string(body, "image");
    }

    /** The image without its tag. */
    String imageRepository() {
        String image = image();
        int colon = image.lastIndexOf(':');
        return colon > image.lastIndexOf('/') ? image.substring(0, colon) : image;
    }

    /** The tag, or empty when there is none. */
    String imageTag() {
        String repository = imageRepository();
        return image().length() > repository.length() ? image().substring(repository.length() + 1) : "";
    }

    List<String> args() {
        return Tree.strings(body, "args");
    }

    /** Every argument that is a flag, in order (so a flag given twice shows twice). */
    List<Arg> flags() {
        return flags(args());
    }

    /** The flags of a command line, as {@link #flags()} reads them. */
    static List<Arg> flags(List<String> args) {
        List<Arg> flags = new ArrayList<>();
        for (String arg : args) {
            if (arg.startsWith("-")) {
                String body = arg.replaceFirst("^--?", "");
                int eq = body.indexOf('=');
                flags.add(eq < 0 ? new Arg(body, null) : new Arg(body.substring(0, eq), body.substring(eq + 1)));
            }
        }
        return flags;
    }

    Optional<Arg> flag(String name) {
        return flags().stream().filter(arg -> arg.name().equals(name)).findFirst();
    }

    Optional<String> flagValue(String name) {
        return flag(name).map(Arg::value);
    }

    List<Mount> mounts() {
        return Tree.maps(body, "volumeMounts").stream()
                .map(mount -> new Mount(Tree.string(mount, "name"), Tree.string(mount, "mountPath"),
                        Tree.string(mount, "mountPropagation"), Boolean.TRUE.equals(mount.get("readOnly"))))
                .toList();
    }

    /** containerPort by name (unnamed ports under their number). */
    Map<String, Integer> ports() {
        Map<String, Integer> ports = new LinkedHashMap<>();
        for (Map<String, Object> port : Tree.maps(body, "ports")) {
            Integer number = (Integer) port.get("containerPort");
            ports.put(port.containsKey("name") ? String.valueOf(port.get("name")) : String.valueOf(number), number);
        }
        return ports;
    }

    List<ProbePort> probePorts() {
        List<ProbePort> ports = new ArrayList<>();
        for (String probe : List.of("livenessProbe", "readinessProbe", "startupProbe")) {
            for (String handler : List.of("httpGet", "tcpSocket", "grpc")) {
                Object port = Tree.at(body, probe, handler, "port");
                if (port != null) {
                    ports.add(new ProbePort(probe, port));
                }
            }
        }
        return ports;
    }

    /** Environment variables by name: a literal value, or "fieldRef:<path>" for the downward API. */
    Map<String, String> env() {
        Map<String, String> env = new LinkedHashMap<>();
        for (Map<String, Object> variable : Tree.maps(body, "env")) {
            String fieldPath = Tree.string(variable, "valueFrom", "fieldRef", "fieldPath");
            env.put(Tree.string(variable, "name"), fieldPath != null ? "fieldRef:" + fieldPath : Tree.string(variable, "value"));
        }
        return env;
    }

    /** The TCP port of a host:port or :port value. */
    static Optional<Integer> port(String address) {
        if (address == null) {
            return Optional.empty();
        }
        int colon = address.lastIndexOf(':');
        try {
            return Optional.of(Integer.parseInt(address.substring(colon + 1)));
        } catch (NumberFormatException e) {
            return Optional.empty();
        }
    }
}
