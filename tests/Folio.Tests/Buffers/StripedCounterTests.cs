using Folio.Buffers;
using FsCheck.Xunit;

namespace Folio.Tests.Buffers;

/// <summary>
/// The pool's striped pinned-frames count: a random program of changes gives the model's count, and changes made
/// on some threads and taken back on others (as an unpin after an await is) sum exactly once they are done.
/// </summary>
public sealed class StripedCounterTests
{
    [Property(MaxTest = 200)]
    public void A_program_of_changes_sums_to_the_models_count(bool[] program)
    {
        var counter = new StripedCounter();
        int model = 0;
        foreach (bool increment in program)
        {
            if (increment)
            {
                counter.Increment();
                model++;
            }
            else
            {
                counter.Decrement();
                model--;
            }

            Assert.Equal(model, counter.Sum());
        }
    }

    [Fact]
    public async Task Changes_undone_on_other_threads_sum_exactly_once_they_are_done()
    {
        const int Writers = 4;
        const int PerWriter = 5_000;
        var counter = new StripedCounter();
        for (int round = 0; round < 5; round++)
        {
            // Each writer adds on a thread of its own, then the adds are taken back from other pool threads (as an
            // unpin after an await is): a cell alone may end anywhere, the sum must not.
            await Task.WhenAll(Enumerable.Range(0, Writers).Select(_ => Task.Factory.StartNew(() =>
            {
                for (int i = 0; i < PerWriter; i++)
                {
                    counter.Increment();
                }
            }, TaskCreationOptions.LongRunning)));
            Assert.Equal(Writers * PerWriter, counter.Sum());

            await Task.WhenAll(Enumerable.Range(0, Writers * 4).Select(_ => Task.Run(async () =>
            {
                for (int i = 0; i < PerWriter / 4; i++)
                {
                    counter.Decrement();
                    if (i % 256 == 0)
                    {
                        await Task.Yield();
                    }
                }
            })));
            Assert.Equal(0, counter.Sum());
        }
    }
}
