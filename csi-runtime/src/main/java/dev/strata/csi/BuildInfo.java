package dev.strata.csi;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** Facts Maven writes into the build: the version GetPluginInfo and --version report. */
public final class BuildInfo {

    private BuildInfo() {}

    public static String version() {
        try (InputStream in = BuildInfo.class.getResourceAsStream("build.properties")) {
            if (in == null) {
                return "unknown";
            }
            Properties properties = new Properties();
            properties.load(in);
            return properties.getProperty("version", "unknown");
        } catch (IOException e) {
            return "unknown";
        }
    }
}
