package dev.strata.csi.rpc;

import io.grpc.Status;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.NotLinkException;

/**
 * A failure with the gRPC code the CSI spec gives it. Domain code throws these; {@link Rpc}
 * turns them into the reply, so the code a caller sees is decided where the failure is understood.
 */
public final class CsiException extends RuntimeException {

    /** At most this much of a message is sent as the status description (see {@link #toStatus}). */
    static final int MAX_DESCRIPTION = 2048;

    private final Status.Code code;

    public CsiException(Status.Code code, String message) {
        super(message, null, false, false);
        this.code = code;
    }

    public Status.Code code() {
        return code;
    }

    /**
     * The reply's status. Its description travels in an HTTP/2 header, which gRPC clients take
     * up to 8 KiB of in all: a longer one (a message quoting a caller's oversized input) would
     * reach the caller as INTERNAL instead of this code, so it is cut short.
     */
    public Status toStatus() {
        String message = getMessage();
        return Status.fromCode(code).withDescription(message.length() <= MAX_DESCRIPTION ? message
                : message.substring(0, MAX_DESCRIPTION) + "... (" + (message.length() - MAX_DESCRIPTION) + " more characters)");
    }

    public static CsiException invalidArgument(String message) {
        return new CsiException(Status.Code.INVALID_ARGUMENT, message);
    }

    public static CsiException notFound(String message) {
        return new CsiException(Status.Code.NOT_FOUND, message);
    }

    public static CsiException alreadyExists(String message) {
        return new CsiException(Status.Code.ALREADY_EXISTS, message);
    }

    public static CsiException failedPrecondition(String message) {
        return new CsiException(Status.Code.FAILED_PRECONDITION, message);
    }

    public static CsiException resourceExhausted(String message) {
        return new CsiException(Status.Code.RESOURCE_EXHAUSTED, message);
    }

    public static CsiException outOfRange(String message) {
        return new CsiException(Status.Code.OUT_OF_RANGE, message);
    }

    public static CsiException aborted(String message) {
        return new CsiException(Status.Code.ABORTED, message);
    }

    public static CsiException unavailable(String message) {
        return new CsiException(Status.Code.UNAVAILABLE, message);
    }

    public static CsiException unauthenticated(String message) {
        return new CsiException(Status.Code.UNAUTHENTICATED, message);
    }

    public static CsiException permissionDenied(String message) {
        return new CsiException(Status.Code.PERMISSION_DENIED, message);
    }

    public static CsiException unimplemented(String message) {
        return new CsiException(Status.Code.UNIMPLEMENTED, message);
    }

    /** Data damaged or lost on its way: a transfer whose chunk or digest does not match. */
    public static CsiException dataLoss(String message) {
        return new CsiException(Status.Code.DATA_LOSS, message);
    }

    public static CsiException internal(String message) {
        return new CsiException(Status.Code.INTERNAL, message);
    }

    /** INVALID_ARGUMENT naming the missing field, as csi-sanity and the sidecars expect. */
    public static CsiException missing(String field) {
        return invalidArgument(field + " is required");
    }

    /**
     * What a failure says, in words fit for a caller: the file and the system's reason ("File name
     * too long"), or the failure's own message; never a Java class name or a stack trace.
     */
    public static String describe(Throwable failure) {
        if (failure instanceof FileSystemException e) {
            String reason = e.getReason() != null ? e.getReason() : switch (e) {
                case NoSuchFileException x -> "No such file or directory";
                case AccessDeniedException x -> "Permission denied";
                case FileAlreadyExistsException x -> "File exists";
                case DirectoryNotEmptyException x -> "Directory not empty";
                case NotDirectoryException x -> "Not a directory";
                case NotLinkException x -> "Not a symbolic link";
                default -> "failed";
            };
            return (e.getFile() == null ? "" : printable(e.getFile())
                    + (e.getOtherFile() == null ? "" : " -> " + printable(e.getOtherFile())) + ": ") + reason;
        }
        String message = failure.getMessage();
        return message == null || message.isBlank() ? "failed without a reason (the server's log has the details)" : message;
    }

    /** A value from a request, safe to put in a message: control characters escaped, length capped. */
    public static String printable(String value) {
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < value.length() && out.length() < 200; i++) {
            char c = value.charAt(i);
            out.append(c < ' ' || c == 0x7f ? String.format("\\x%02x", (int) c) : String.valueOf(c));
        }
        return value.length() > 200 ? out + "..." : out.toString();
    }

}
