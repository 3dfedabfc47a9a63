using System.Diagnostics.CodeAnalysis;
using System.Runtime.CompilerServices;
using Folio.Journal;

namespace Folio;

/// <summary>Throws from out-of-line methods so hot paths stay small and inlinable.</summary>
internal static class ThrowHelper
{
    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowObjectDisposed(string objectName) => throw new ObjectDisposedException(objectName);

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowArgumentOutOfRange(string paramName, object? actualValue, string message) =>
        throw new ArgumentOutOfRangeException(paramName, actualValue, message);

    /// <summary>The exception <see cref="ThrowArgumentOutOfRange"/> throws, for a caller that captures it.</summary>
    public static ArgumentOutOfRangeException ArgumentOutOfRange(string paramName, object? actualValue,
        string message) => new(paramName, actualValue, message);

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowArgument(string paramName, string message)
        => throw new ArgumentException(message, paramName);

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowInvalidOperation(string message) => throw new InvalidOperationException(message);

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowJournalCorrupted(string filePath, long offset, string reason) =>
        throw new JournalCorruptedException(filePath, offset, reason);

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowStoreCorrupted(string filePath, long offset, string reason) =>
        throw new StoreCorruptedException(filePath, offset, reason);

    [DoesNotReturn]
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowPositionPurged(long requestedSequence, long firstAvailableSequence) =>
        throw new JournalPositionPurgedException(requestedSequence, firstAvailableSequence);
}
