package dev.strata.csi.log;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.TextFormat;
import csi.v1.Csi;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SecretsTest {

    @Test
    void secretMapIsRemovedAndEverythingElseKept() {
        NodeStageVolumeRequest request = NodeStageVolumeRequest.newBuilder()
                .setVolumeId("vol-1")
                .setStagingTargetPath("/staging")
                .putSecrets("password", "hunter2")
                .putVolumeContext("pool", "fast")
                .build();
        String logged = TextFormat.printer().shortDebugString(Secrets.redact(request));
        assertFalse(logged.contains("hunter2"), logged);
        assertFalse(logged.contains("password"), logged);
        assertTrue(logged.contains("vol-1") && logged.contains("/staging") && logged.contains("fast"), logged);
    }

    @Test
    void serviceAccountTokensInAVolumeContextAreRedacted() {
        String tokens = "{\"strata.csi.dev\":{\"token\":\"eyJhbGciOiJSUzI1NiJ9.secret\",\"expirationTimestamp\":\"2026-11-27T05:00:00Z\"}}";
        var request = Csi.NodePublishVolumeRequest.newBuilder().setVolumeId("vol-1")
                .putVolumeContext(Secrets.SERVICE_ACCOUNT_TOKENS, tokens)
                .putVolumeContext("csi.storage.k8s.io/pod.name", "web-0")
                .build();
        String logged = TextFormat.printer().shortDebugString(Secrets.redact(request));
        assertFalse(logged.contains("eyJhbGciOiJSUzI1NiJ9"), logged);
        assertTrue(logged.contains(Secrets.SERVICE_ACCOUNT_TOKENS) && logged.contains(Secrets.REDACTED), logged);
        assertTrue(logged.contains("web-0"), logged);
    }

    @Test
    void messageWithoutSecretsIsUnchanged() {
        CreateVolumeRequest request = CreateVolumeRequest.newBuilder().setName("pvc-1").putParameters("fsType", "xfs").build();
        assertEquals(request, Secrets.redact(request));
    }

    /** The option in the descriptors drives redaction: every field the spec marks secret is found. */
    @Test
    void everySecretFieldOfTheProtocolIsRecognised() {
        List<String> secretFields = new ArrayList<>();
        for (Descriptor type : Csi.getDescriptor().getMessageTypes()) {
            collect(type, secretFields);
        }
        assertTrue(secretFields.contains("csi.v1.CreateVolumeRequest.secrets"), secretFields.toString());
        assertTrue(secretFields.contains("csi.v1.NodePublishVolumeRequest.secrets"), secretFields.toString());
        assertTrue(secretFields.size() >= 15, "v1.12 marks at least 15 fields secret: " + secretFields);
        assertTrue(secretFields.stream().allMatch(name -> name.endsWith("secrets")), secretFields.toString());
    }

    private static void collect(Descriptor type, List<String> out) {
        for (FieldDescriptor field : type.getFields()) {
            if (Secrets.isSecret(field)) {
                out.add(field.getFullName());
            }
        }
        type.getNestedTypes().forEach(nested -> collect(nested, out));
    }
}
