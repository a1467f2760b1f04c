package dev.strata.csi.log;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import csi.v1.Csi;
import java.util.Map;

/**
 * Removes the fields the CSI spec marks with the {@code csi_secret} option from a message before
 * it is logged. Driven by the option in the proto descriptors, so a secret field added to the
 * protocol is covered without anyone keeping a list. One value outside those fields is a secret
 * too: the ServiceAccount tokens kubelet puts into a volume_context when a CSIDriver asks for them
 * (tokenRequests), which the spec cannot mark. Nor is any {@code bytes} field logged as it is:
 * those carry volume data (each WriteContent chunk of a copy between nodes) or digests, and
 * are logged as their length only ("[65536 bytes]"), next to the offset the message gives.
 */
public final class Secrets {

    /** The volume_context key under which kubelet passes the pod's ServiceAccount tokens. */
    public static final String SERVICE_ACCOUNT_TOKENS = "csi.storage.k8s.io/serviceAccount.tokens";
    static final String REDACTED = "[redacted]";

    private Secrets() {}

    /** The message with every secret field, at any depth, cleared, and every bytes field's content replaced by its length. */
    public static Message redact(Message message) {
        Message.Builder builder = message.toBuilder();
        for (Map.Entry<FieldDescriptor, Object> entry : message.getAllFields().entrySet()) {
            FieldDescriptor field = entry.getKey();
            if (isSecret(field)) {
                builder.clearField(field);
            } else if (field.getJavaType() == FieldDescriptor.JavaType.BYTE_STRING) {
                builder.clearField(field);
                if (field.isRepeated()) {
                    for (Object element : (Iterable<?>) entry.getValue()) {
                        builder.addRepeatedField(field, length((ByteString) element));
                    }
                } else {
                    builder.setField(field, length((ByteString) entry.getValue()));
                }
            } else if (field.isMapField()) {
                builder.clearField(field);
                for (Object element : (Iterable<?>) entry.getValue()) {
                    builder.addRepeatedField(field, redactTokens((Message) element));
                }
            } else if (field.getJavaType() == FieldDescriptor.JavaType.MESSAGE && !field.isMapField()) {
                if (field.isRepeated()) {
                    builder.clearField(field);
                    for (Object element : (Iterable<?>) entry.getValue()) {
                        builder.addRepeatedField(field, redact((Message) element));
                    }
                } else {
                    builder.setField(field, redact((Message) entry.getValue()));
                }
            }
        }
        return builder.build();
    }

    /** What a log shows of a bytes field: how many bytes, never which. */
    private static ByteString length(ByteString bytes) {
        return ByteString.copyFromUtf8("[" + bytes.size() + " bytes]");
    }

    /** A map entry with the tokens' value replaced; the key stays, so the log still shows that tokens came. */
    private static Message redactTokens(Message mapEntry) {
        FieldDescriptor key = mapEntry.getDescriptorForType().findFieldByName("key");
        FieldDescriptor value = mapEntry.getDescriptorForType().findFieldByName("value");
        if (!SERVICE_ACCOUNT_TOKENS.equals(mapEntry.getField(key)) || value.getJavaType() != FieldDescriptor.JavaType.STRING) {
            return mapEntry;
        }
        return mapEntry.toBuilder().setField(value, REDACTED).build();
    }

    static boolean isSecret(FieldDescriptor field) {
        return field.getOptions().getExtension(Csi.csiSecret);
    }
}
