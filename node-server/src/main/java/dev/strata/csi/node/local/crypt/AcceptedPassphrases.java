package dev.strata.csi.node.local.crypt;

import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.log.Log;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which passphrase of its Secret each open encrypted volume accepts, as the node last found it:
 * the metric {@code strata_volume_passphrase{volume,accepts}} (1 for the one state a volume is in)
 * and a log line at each change, so the user knows when the previous passphrase can be forgotten.
 */
public final class AcceptedPassphrases {

    /** What a volume's LUKS2 header opens with: the Secret's {@code passphrase}, its {@code previousPassphrase}, or both. */
    public enum Accepts {
        CURRENT, PREVIOUS, BOTH;

        String label() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    private final Gauge gauge;
    /** Volume name -> what it accepts: the gauge's one series per volume. */
    private final Map<String, Accepts> reported = new ConcurrentHashMap<>();
    private final Log log;

    public AcceptedPassphrases(PrometheusRegistry registry, Log log) {
        this.gauge = Gauge.builder()
                .name("strata_volume_passphrase")
                .help("1 for the passphrase of its Secret an open encrypted volume accepts: current, previous (rotation "
                        + "not done) or both (rotation under way)")
                .labelNames("volume", "accepts")
                .register(registry);
        this.log = log;
    }

    /** The volume accepts {@code accepts} now. */
    public void report(LocalVolumeId id, Accepts accepts) {
        Accepts before = reported.put(id.name(), accepts);
        if (before != null && before != accepts) {
            gauge.remove(id.name(), before.label());
        }
        gauge.labelValues(id.name(), accepts.label()).set(1);
        if (before != accepts) {
            log.info("encrypted volume's passphrases", "volume", id, "accepts", accepts.label());
        }
    }

    /** The volume is closed: no longer reported. */
    public void forget(LocalVolumeId id) {
        Accepts before = reported.remove(id.name());
        if (before != null) {
            gauge.remove(id.name(), before.label());
        }
    }

    /** What the volume accepts, as last reported. */
    public Optional<Accepts> of(LocalVolumeId id) {
        return Optional.ofNullable(reported.get(id.name()));
    }
}
