package dev.strata.csi.log;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import csi.v1.Csi;
import java.util.Map;

/**
 * Removes the fields the CSI spec marks with the {@code csi_secret} option from a message before
 * it is logged. Driven by the option in the proto descriptors, so a secret field added to the
 * protocol is covered without anyone keeping a list.
 */
public final class Secrets {

    private Secrets() {}

    /** The message with every secret field, at any depth, cleared. */
    public static Message redact(Message message) {
        Message.Builder builder = message.toBuilder();
        for (Map.Entry<FieldDescriptor, Object> entry : message.getAllFields().entrySet()) {
            FieldDescriptor field = entry.getKey();
            if (isSecret(field)) {
                builder.clearField(field);
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

    static boolean isSecret(FieldDescriptor field) {
        return field.getOptions().getExtension(Csi.csiSecret);
    }
}
