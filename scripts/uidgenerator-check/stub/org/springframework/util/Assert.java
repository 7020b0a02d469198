package org.springframework.util;
// Minimal stand-in for the one Spring method BitsAllocator/DefaultUidGenerator call.
public final class Assert {
    public static void isTrue(boolean ok, String message) { if (!ok) throw new IllegalArgumentException(message); }
    public static void notNull(Object o, String message) { if (o == null) throw new IllegalArgumentException(message); }
}
