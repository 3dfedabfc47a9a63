using FsCheck;
using FsCheck.Fluent;

namespace Folio.Tests.Infrastructure;

/// <summary>Random programs for model-based properties: arrays of operations, each an int a test decodes into a step
/// and its argument.</summary>
internal static class OperationPrograms
{
    /// <summary>Programs of at most <paramref name="maxLength"/> operations that shrink by dropping one operation at a
    /// time, so a failure is reported as a short program.</summary>
    public static Arbitrary<int[]> ShrinkingBySteps(int maxLength) =>
        Arb.From(
            Gen.ArrayOf(Gen.Choose(0, int.MaxValue)).Select(a => a.Length > maxLength ? a[..maxLength] : a),
            static program => Enumerable.Range(0, program.Length)
                .Select(skip => program.Where((_, i) => i != skip).ToArray()));
}
