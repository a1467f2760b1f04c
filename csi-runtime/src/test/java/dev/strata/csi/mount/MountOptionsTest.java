package dev.strata.csi.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

class MountOptionsTest {

    @Test
    void joinsOptionsIntoOneValue() throws MountException {
        assertEquals("noatime,discard,context=system_u:object_r:foo_t:s0",
                MountOptions.join(List.of("noatime", "discard", "context=system_u:object_r:foo_t:s0")));
        assertEquals("", MountOptions.join(List.of()));
    }

    @Test
    void anOptionCannotSmuggleInAnotherOption() {
        assertEquals("mount option \"ro,suid\" contains a comma, so it would be several options",
                assertThrows(MountException.class, () -> MountOptions.join(List.of("noatime", "ro,suid"))).getMessage());
    }

    @Test
    void anOptionCannotBecomeAnArgument() {
        assertEquals("mount option \"--bind\" starts with '-'",
                assertThrows(MountException.class, () -> MountOptions.join(List.of("--bind"))).getMessage());
    }

    @Test
    void controlCharactersAndEmptyOptionsAreRefusedAndShownOnOneLine() {
        assertEquals("mount option \"a\\x0ab\" contains a control character",
                assertThrows(MountException.class, () -> MountOptions.join(List.of("a\nb"))).getMessage());
        assertEquals("mount option \"a\\x00\" contains a control character",
                assertThrows(MountException.class, () -> MountOptions.join(List.of("a\0"))).getMessage());
        assertEquals("mount option \"\" is empty",
                assertThrows(MountException.class, () -> MountOptions.join(List.of(""))).getMessage());
    }
}
