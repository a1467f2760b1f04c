package dev.strata.csi.testing;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** A directory laid out as kubelet lays out a Secret volume, updated as kubelet updates it. */
public final class SecretVolume {

    private SecretVolume() {}

    /**
     * Writes {@code files} of {@code from} into {@code secret}: a new directory {@code version},
     * then the {@code ..data} link swapped to it in one rename; each file is a link through {@code ..data}.
     */
    public static void publish(Path secret, Path from, String version, List<String> files) throws IOException {
        Map<String, Path> data = new LinkedHashMap<>();
        files.forEach(name -> data.put(name, from.resolve(name)));
        publish(secret, data, version);
    }

    /** As {@link #publish(Path, Path, String, List)}, the Secret's keys and the files they hold given one by one. */
    public static void publish(Path secret, Map<String, Path> files, String version) throws IOException {
        Files.createDirectories(secret);
        Path target = Files.createDirectories(secret.resolve(version));
        for (var file : files.entrySet()) {
            String name = file.getKey();
            Files.copy(file.getValue(), target.resolve(name));
            Path link = secret.resolve(name);
            if (!Files.isSymbolicLink(link)) {
                Files.createSymbolicLink(link, Path.of("..data", name));
            }
        }
        Path next = secret.resolve("..data_tmp");
        Files.createSymbolicLink(next, Path.of(version));
        Files.move(next, secret.resolve("..data"), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    /**
     * The files of one side's agent Secret as deploy/kustomization.yaml makes it from what
     * hack/agent-credentials.sh wrote to {@code credentials}: token, ca.crt, and the tls.crt and
     * tls.key of {@code pair} ("controller" or "node").
     */
    public static Map<String, Path> agentCredentials(Path credentials, String pair) {
        Map<String, Path> files = new LinkedHashMap<>();
        files.put("token", credentials.resolve("token"));
        files.put("ca.crt", credentials.resolve("ca.crt"));
        files.put("tls.crt", credentials.resolve(pair).resolve("tls.crt"));
        files.put("tls.key", credentials.resolve(pair).resolve("tls.key"));
        return files;
    }
}
