using System.Buffers;
using System.Buffers.Binary;
using System.IO.Pipelines;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Journal;

/// <summary>
/// <see cref="JournalReader.CopyToAsync"/>: committed entries copied from the mapping into a pipe, framed, in order,
/// across segment rotations; a slow reader holds the copy at the pipe's threshold; the copy follows new commits and
/// stops at the sequence asked for or when the reader goes away.
/// </summary>
public sealed class JournalStreamingTests
{
    [Fact]
    public async Task Entries_stream_in_order_across_segments_and_a_slow_reader_holds_the_copy_back()
    {
        using var dir = new TempDirectory();
        using WriteAheadJournal journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(64 * 1024));
        for (long i = 1; i <= 3_000; i++)
        {
            journal.Append(JournalTestExtensions.Payload(1, i, (int)(i % 300)));
            if (i % 7 == 0)
            {
                journal.Sync();
            }
        }

        journal.Sync();
        Assert.True(journal.SegmentCount > 5);
        List<(long Sequence, long Timestamp, byte[] Data)> expected = journal.ReadAll(1);

        const int Threshold = 8 * 1024;
        var pipe = new Pipe(new PipeOptions(pauseWriterThreshold: Threshold, resumeWriterThreshold: Threshold / 2,
            useSynchronizationContext: false));
        long largest = 0;
        var received = new List<(long, long, byte[])>();
        Task reading = Task.Run(async () =>
        {
            var pending = new ArrayBufferWriter<byte>();
            while (true)
            {
                ReadResult result = await pipe.Reader.ReadAsync();
                largest = Math.Max(largest, result.Buffer.Length);
                foreach (ReadOnlyMemory<byte> segment in result.Buffer)
                {
                    pending.Write(segment.Span);
                }

                pipe.Reader.AdvanceTo(result.Buffer.End);
                if (result.IsCompleted)
                {
                    break;
                }

                await Task.Delay(1);
            }

            ReadOnlySpan<byte> bytes = pending.WrittenSpan;
            while (bytes.Length > 0)
            {
                int length = BinaryPrimitives.ReadInt32LittleEndian(bytes[16..]);
                received.Add((BinaryPrimitives.ReadInt64LittleEndian(bytes),
                    BinaryPrimitives.ReadInt64LittleEndian(bytes[8..]),
                    bytes.Slice(JournalReader.StreamedEntryHeaderSize, length).ToArray()));
                bytes = bytes[(JournalReader.StreamedEntryHeaderSize + length)..];
            }
        });

        using (JournalReader reader = journal.OpenReader(1))
        {
            Assert.Equal(3_000, await reader.CopyToAsync(pipe.Writer, throughSequence: 3_000));
        }

        await pipe.Writer.CompleteAsync();
        await reading;
        Assert.Equal(expected.Count, received.Count);
        for (int i = 0; i < expected.Count; i++)
        {
            Assert.Equal(expected[i].Sequence, received[i].Item1);
            Assert.Equal(expected[i].Timestamp, received[i].Item2);
            Assert.Equal(expected[i].Data, received[i].Item3);
        }

        // The copy flushes at 64 KiB at most; a flush waits while the pipe holds the threshold.
        Assert.True(largest <= Threshold + (64 * 1024) + 1024, $"{largest} bytes were buffered");
    }

    [Fact]
    public async Task The_copy_follows_new_commits_to_the_sequence_asked_for_and_stops_when_the_reader_goes()
    {
        using var dir = new TempDirectory();
        using WriteAheadJournal journal = WriteAheadJournal.Open(dir.Path, JournalTestExtensions.Tiny(64 * 1024));
        journal.Append(JournalTestExtensions.Payload(2, 1, 10));
        journal.Sync();
        var pipe = new Pipe();
        using JournalReader reader = journal.OpenReader(1);
        Task<long> copy = reader.CopyToAsync(pipe.Writer, throughSequence: 5);
        for (long i = 2; i <= 5; i++)
        {
            await Task.Delay(10);
            Assert.False(copy.IsCompleted);
            journal.Append(JournalTestExtensions.Payload(2, i, 10));
            journal.Sync();
        }

        Assert.Equal(5, await copy.WaitAsync(TestDeadline.Hang));
        ReadResult result = await pipe.Reader.ReadAsync();
        Assert.Equal(5 * (JournalReader.StreamedEntryHeaderSize + 10), result.Buffer.Length);
        pipe.Reader.AdvanceTo(result.Buffer.End);

        // A reader that completes ends a copy that follows the journal.
        await pipe.Reader.CompleteAsync();
        journal.Append(JournalTestExtensions.Payload(2, 6, 10));
        journal.Sync();
        using JournalReader following = journal.OpenReader(1);
        Assert.InRange(await following.CopyToAsync(pipe.Writer).WaitAsync(TestDeadline.Hang), 1, 6);
    }
}
