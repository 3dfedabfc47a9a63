using System.Globalization;
using System.Text;
using System.Text.Json;
using Folio.Journal;
using Folio.Tests.Infrastructure;

namespace Folio.Tests.Tool;

/// <summary>
/// The <c>folio</c> tool end to end: each command runs as a child process against a real store, and its exit code and
/// output are checked; <c>info</c>, <c>verify</c>, <c>export</c>, <c>backup</c> and <c>tail</c> read a store another
/// process holds, others refuse it with one line, as they do a missing store and a damaged one.
/// </summary>
public sealed class FolioToolTests
{
    [Fact]
    public async Task Info_shows_the_collections_their_counts_and_the_positions()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 30, orders: 12);
        (int exit, string output, string error) = await FolioToolProcess.RunAsync("info", store);
        Assert.True(exit == 0, error);
        Assert.Contains("people  30 documents", output, StringComparison.Ordinal);
        Assert.Contains("orders  12 documents", output, StringComparison.Ordinal);
        Assert.Contains("last commit   42", output, StringComparison.Ordinal);
        Assert.Contains("data file     format 3", output, StringComparison.Ordinal);
        Assert.Contains("feed readers  none", output, StringComparison.Ordinal);
        StoreInfo info = await DocumentStore.ReadInfoAsync(store);
        Assert.Contains(string.Create(CultureInfo.InvariantCulture,
            $"({info.DataFileFreeBytes / 1048576.0:F1} MiB free between chunks)"), output, StringComparison.Ordinal);
        Assert.NotEqual(Guid.Empty, info.StoreId);
        Assert.Contains($"store id      {info.StoreId}", output, StringComparison.Ordinal);
    }

    [Fact]
    public async Task Info_shows_the_change_feed_readers_of_the_files_and_where_the_oldest_is()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 30, orders: 12);

        // A reader of the files that has read up to sequence 10, paused (as `folio tail` into a slow pipe is).
        using var stop = new CancellationTokenSource();
        await using IAsyncEnumerator<DocumentChange> reader = DocumentChanges.ReadFilesAsync(store, 5, follow: true,
            stop.Token).GetAsyncEnumerator(stop.Token);
        for (long sequence = 5; sequence <= 10; sequence++)
        {
            Assert.True(await reader.MoveNextAsync());
            Assert.Equal(sequence, reader.Current.Sequence);
        }

        StoreInfo info = await DocumentStore.ReadInfoAsync(store);
        Assert.Equal(1, info.FeedReaders);
        // Its pin moves as it reads the files, a batch of records ahead of what it has handed out.
        Assert.InRange(info.OldestFeedReaderSequence!.Value, 5, 43);
        (int exit, string output, string error) = await FolioToolProcess.RunAsync("info", store);
        Assert.True(exit == 0, error);
        Assert.Contains(string.Create(CultureInfo.InvariantCulture, $"feed readers  1, the oldest at sequence "
            + $"{info.OldestFeedReaderSequence} (the journal is kept from there)"), output, StringComparison.Ordinal);

        // The store's own process sees the same reader; the pin of a reader that died counts for nothing and a
        // description leaves it for the writer to delete.
        string dead = Path.Combine(store, "readers", "dead.feed");
        await File.WriteAllBytesAsync(dead, Folio.Journal.FeedPin.Encode(1));
        await using (DocumentStore held = DocumentStore.Open(store, TestStoreOptions.SmallSegments()))
        {
            StoreInfo own = held.GetInfo();
            Assert.Equal(1, own.FeedReaders);
            Assert.Equal(info.OldestFeedReaderSequence, own.OldestFeedReaderSequence);
        }

        Assert.Equal(1, (await DocumentStore.ReadInfoAsync(store)).FeedReaders);
        Assert.True(File.Exists(dead));

        await stop.CancelAsync();
        await reader.DisposeAsync();
        info = await DocumentStore.ReadInfoAsync(store);
        Assert.Equal(0, info.FeedReaders);
        Assert.Null(info.OldestFeedReaderSequence);
    }

    [Fact]
    public async Task Info_verify_export_and_backup_read_a_store_another_process_has_open()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 30, orders: 12);
        await using DocumentStore held = DocumentStore.Open(store, TestStoreOptions.SmallSegments());
        await held.DeleteAsync("people", "p0003"); // sequence 43: a checkpointed document deleted
        await held.PutAsync("invoices", "i1", "{\"total\":1}"u8.ToArray()); // 44: a new collection
        (int exit, string output, string error) = await FolioToolProcess.RunAsync("info", store);
        Assert.True(exit == 0, error);
        Assert.Contains("people  29 documents", output, StringComparison.Ordinal);
        Assert.Contains("orders  12 documents", output, StringComparison.Ordinal);
        Assert.Contains("invoices  1 documents", output, StringComparison.Ordinal);
        Assert.Contains("last commit   44", output, StringComparison.Ordinal);

        (exit, output, error) = await FolioToolProcess.RunAsync("verify", store);
        Assert.True(exit == 0, error);
        Assert.Contains("healthy", output, StringComparison.Ordinal);

        (exit, output, error) = await FolioToolProcess.RunAsync("export", store);
        Assert.True(exit == 0, error);
        List<string> exported = Documents(output);
        Assert.Contains("export: done", error, StringComparison.Ordinal); // redirected: plain progress lines
        Assert.Contains("42 of 42 documents", error, StringComparison.Ordinal);
        Assert.Equal(1 + 12 + 29, exported.Count); // invoices, orders, people
        Assert.Equal("invoices/i1={\"total\":1}", exported[0]);
        Assert.Equal("orders/o0000={\"total\":0}", exported[1]);
        Assert.DoesNotContain(exported, line => line.StartsWith("people/p0003=", StringComparison.Ordinal));
        Assert.Equal(held.Scan("people").Select(d => "people/" + d.Id + "=" + Encoding.UTF8.GetString(d.Json.Span)),
            exported.Skip(13));

        string backup = Path.Combine(dir.Path, "held.backup");
        (exit, output, error) = await FolioToolProcess.RunAsync("backup", store, backup);
        Assert.True(exit == 0, error);
        Assert.Contains("sequence 44", output, StringComparison.Ordinal);
        string restored = Path.Combine(dir.Path, "restored");
        (exit, _, error) = await FolioToolProcess.RunAsync("restore", backup, restored);
        Assert.True(exit == 0, error);
        (exit, string again, error) = await FolioToolProcess.RunAsync("export", restored);
        Assert.True(exit == 0, error);
        Assert.Equal(exported, Documents(again));
    }

    [Fact]
    public async Task An_export_killed_mid_stream_leaves_a_pin_the_writer_deletes_and_frees_what_it_held()
    {
        using var dir = new TempDirectory();
        string store = Path.Combine(dir.Path, "store");
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.CheckpointInterval = Timeout.InfiniteTimeSpan;
        await using DocumentStore held = DocumentStore.Open(store, options);
        await RewriteAsync(held, round: 0);
        var pinned = held.Pages.Chunks.Select(chunk => chunk.Id).ToHashSet();
        string readers = Path.Combine(store, "readers");

        using (System.Diagnostics.Process export = FolioToolProcess.Start("export", store))
        {
            // Its output is not read past the first line: the export blocks on the full pipe, mid-stream, pinned.
            using var deadline = new CancellationTokenSource(TimeSpan.FromMinutes(2));
            Assert.NotNull(await export.StandardOutput.ReadLineAsync(deadline.Token));
            Assert.Single(Directory.GetFiles(readers, "*.pin"));
            export.Kill(entireProcessTree: true); // kill -9: the pin file stays, its lock goes with the process
            await export.WaitForExitAsync(deadline.Token);
        }

        Assert.Single(Directory.GetFiles(readers, "*.pin"));
        for (int round = 1; round <= 3; round++)
        {
            await RewriteAsync(held, round); // every document rewritten, then a checkpoint
        }

        Assert.Empty(Directory.GetFiles(readers, "*.pin"));
        Assert.False(pinned.Overlaps(held.Pages.Chunks.Select(chunk => chunk.Id)), "the dead export holds nothing");
    }

    [Fact]
    public async Task Backup_restore_and_export_round_trip_every_document()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 200, orders: 50);
        string backup = Path.Combine(dir.Path, "store.backup");
        string restored = Path.Combine(dir.Path, "restored");

        (int exit, string output, string error) = await FolioToolProcess.RunAsync("backup", store, backup);
        Assert.True(exit == 0, error);
        Assert.Contains("backed up to", output, StringComparison.Ordinal);
        Assert.Contains("backup: done", error, StringComparison.Ordinal); // redirected: plain progress lines
        Assert.True(File.Exists(backup));

        (exit, output, error) = await FolioToolProcess.RunAsync("restore", backup, restored);
        Assert.True(exit == 0, error);
        Assert.Contains("250 documents, verified", output, StringComparison.Ordinal);

        (exit, string original, error) = await FolioToolProcess.RunAsync("export", store);
        Assert.True(exit == 0, error);
        (exit, string copy, error) = await FolioToolProcess.RunAsync("export", restored);
        Assert.True(exit == 0, error);
        string[] lines = original.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        Assert.Equal(250, lines.Length);
        Assert.Equal(original, copy);
        using JsonDocument first = JsonDocument.Parse(lines[0]);
        Assert.Equal("orders", first.RootElement.GetProperty("collection").GetString());
        Assert.Equal(JsonValueKind.Object, first.RootElement.GetProperty("document").ValueKind);

        (exit, output, error) = await FolioToolProcess.RunAsync("verify", restored);
        Assert.True(exit == 0, error);
        Assert.Contains("healthy", output, StringComparison.Ordinal);

        (exit, output, error) = await FolioToolProcess.RunAsync("compact", restored);
        Assert.True(exit == 0, error);
        Assert.Contains("compacted: ", output, StringComparison.Ordinal);
        (exit, string afterCompaction, error) = await FolioToolProcess.RunAsync("export", restored);
        Assert.True(exit == 0, error);
        Assert.Equal(original, afterCompaction);
    }

    [Fact]
    public async Task An_incremental_backup_restores_after_its_full_backup()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 20, orders: 0);
        string full = Path.Combine(dir.Path, "full.backup");
        string increment = Path.Combine(dir.Path, "increment.backup");
        (int exit, _, string error) = await FolioToolProcess.RunAsync("backup", store, full);
        Assert.True(exit == 0, error);
        await using (DocumentStore opened = DocumentStore.Open(store, TestStoreOptions.SmallSegments()))
        {
            await opened.PutAsync("orders", "late", "{\"total\":1}"u8.ToArray()); // sequence 21
        }

        (exit, _, error) = await FolioToolProcess.RunAsync("backup", store, increment, "--from", "21",
            "--max-rate", "-1");
        Assert.Equal(1, exit);
        Assert.Contains("--max-rate must be 0 (no limit) or a number of MiB per second", error,
            StringComparison.Ordinal);
        (exit, _, error) = await FolioToolProcess.RunAsync("backup", store, increment, "--from", "21",
            "--max-rate", "0");
        Assert.True(exit == 0, error);
        string restored = Path.Combine(dir.Path, "restored");
        (exit, string output, error) = await FolioToolProcess.RunAsync("restore", full, restored, "--increment",
            increment);
        Assert.True(exit == 0, error);
        Assert.Contains("sequence 21, 21 documents", output, StringComparison.Ordinal);

        // The increment in the full backup's place: a one-line error in the command line's terms.
        (exit, _, error) = await FolioToolProcess.RunAsync("restore", increment, Path.Combine(dir.Path, "other"));
        Assert.Equal(1, exit);
        Assert.EndsWith("folio: The first backup of a restore is an incremental backup: give the full backup first, "
            + "then every incremental backup in order.", error.Trim(), StringComparison.Ordinal);
    }

    [Fact]
    public async Task Import_reads_an_export_into_a_new_store_and_a_bad_line_fails_with_its_number()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 40, orders: 5);
        (int exit, string exported, string error) = await FolioToolProcess.RunAsync("export", store);
        Assert.True(exit == 0, error);
        string file = Path.Combine(dir.Path, "export.ndjson");
        await File.WriteAllTextAsync(file, exported);

        string target = Path.Combine(dir.Path, "imported");
        (exit, string output, error) = await FolioToolProcess.RunAsync("import", target, file);
        Assert.True(exit == 0, error);
        Assert.Contains("imported 45 documents", output, StringComparison.Ordinal);
        (exit, string again, error) = await FolioToolProcess.RunAsync("export", target);
        Assert.True(exit == 0, error);
        Assert.Equal(Documents(exported), Documents(again));

        string input = "{\"collection\":\"people\",\"id\":\"x\",\"document\":{}}\nnot json\n";
        (exit, _, error) = await FolioToolProcess.RunWithInputAsync(input, "import", target, "-");
        Assert.Equal(1, exit);
        Assert.StartsWith("folio: line 2 is not valid JSON", error, StringComparison.Ordinal);
        Assert.EndsWith("; nothing was imported", error.Trim(),
            StringComparison.Ordinal);
        Assert.Single(error.Trim().Split('\n'));

        // Past a committed batch of 1,000 lines, the error says what the store kept.
        var lines = new StringBuilder();
        for (int i = 0; i < 1_500; i++)
        {
            lines.Append(i == 1_200 ? "not json\n"
                : $"{{\"collection\":\"batch\",\"id\":\"b{i}\",\"document\":{{}}}}\n");
        }

        (exit, _, error) = await FolioToolProcess.RunWithInputAsync(lines.ToString(), "import", target, "-");
        Assert.Equal(1, exit);
        Assert.StartsWith("folio: line 1201 is not valid JSON", error, StringComparison.Ordinal);
        Assert.EndsWith("; the 1000 documents of lines 1 to 1000 were imported, none after", error.Trim(),
            StringComparison.Ordinal);
        await using DocumentStore kept = DocumentStore.Open(target, TestStoreOptions.SmallSegments());
        Assert.NotNull(kept.Get("batch", "b999"));
        Assert.Null(kept.Get("batch", "b1000"));
    }

    [Fact]
    public async Task Import_of_large_documents_commits_them_a_few_megabytes_at_a_time()
    {
        using var dir = new TempDirectory();
        string target = Path.Combine(dir.Path, "imported");

        // 1,000 documents of 40 KB: 40 MB, more than one commit (one journal record of a 32 MiB segment) can hold.
        string file = Path.Combine(dir.Path, "large.ndjson");
        await using (var writer = new StreamWriter(file))
        {
            for (int i = 0; i < 1_000; i++)
            {
                await writer.WriteAsync($"{{\"collection\":\"c\",\"id\":\"d{i:D4}\",\"document\":{{\"pad\":\"");
                await writer.WriteAsync(new string((char)('a' + (i % 26)), 40_000));
                await writer.WriteAsync("\"}}\n");
            }
        }

        (int exit, string output, string error) = await FolioToolProcess.RunAsync("import", target, file);
        Assert.True(exit == 0, error);
        Assert.Contains("imported 1000 documents", output, StringComparison.Ordinal);
        await using DocumentStore imported = DocumentStore.Open(target, TestStoreOptions.SmallSegments());
        Assert.InRange(imported.LastCommittedSequence, 10, 20); // about 4 MiB a commit
        Assert.Equal(1_000, imported.Scan("c").Count());
        Assert.Equal($"{{\"pad\":\"{new string('z', 40_000)}\"}}",
            Encoding.UTF8.GetString(imported.Get("c", "d0025")!.Value.Json.Span));
    }

    [Fact]
    public async Task Import_stops_at_a_line_longer_than_any_document_allowed_and_takes_a_larger_limit_when_told()
    {
        using var dir = new TempDirectory();
        string target = Path.Combine(dir.Path, "imported");

        // 64 MiB with no line break: refused once the limit's worth is buffered, not read whole into memory.
        string endless = Path.Combine(dir.Path, "endless.ndjson");
        await using (FileStream stream = File.Create(endless))
        {
            stream.Write("{\"collection\":\"c\",\"id\":\"a\",\"document\":\""u8);
            stream.SetLength(64L << 20);
        }

        (int exit, _, string error) = await FolioToolProcess.RunAsync("import", target, endless,
            "--max-document-size", "1000");
        Assert.Equal(1, exit);
        Assert.StartsWith("folio: line 1 is longer than 66536 bytes, more than a line with a document of at most "
            + "--max-document-size (1000) bytes can be; nothing was imported", error.Trim(), StringComparison.Ordinal);

        // A document over the limit in a line within it: its line and size.
        string big = "{\"x\":\"" + new string('y', 1_994) + "\"}";
        string lines = "{\"collection\":\"c\",\"id\":\"small\",\"document\":{}}\n"
            + $"{{\"collection\":\"c\",\"id\":\"big\",\"document\":{big}}}\n";
        (exit, _, error) = await FolioToolProcess.RunWithInputAsync(lines, "import", target, "-",
            "--max-document-size", "1000");
        Assert.Equal(1, exit);
        Assert.StartsWith("folio: line 2: the document is 2002 bytes, more than --max-document-size (1000); "
            + "nothing was imported", error.Trim(), StringComparison.Ordinal);

        // Told a larger limit, the same lines import; a limit the store cannot take is refused as an option.
        (exit, string output, error) = await FolioToolProcess.RunWithInputAsync(lines, "import", target, "-",
            "--max-document-size", "4096");
        Assert.True(exit == 0, error);
        Assert.Contains("imported 2 documents", output, StringComparison.Ordinal);
        (exit, _, error) = await FolioToolProcess.RunAsync("import", target, endless, "--max-document-size", "0");
        Assert.Equal(1, exit);
        Assert.Equal("folio: --max-document-size must be between 1 and 268435456 bytes, not 0.", error.Trim());

        await using DocumentStore imported = DocumentStore.Open(target, TestStoreOptions.SmallSegments());
        Assert.Equal(big, Encoding.UTF8.GetString(imported.Get("c", "big")!.Value.Json.Span));
    }

    [Fact]
    public async Task Export_and_import_carry_every_document_byte_for_byte_but_line_breaks_between_tokens()
    {
        using var dir = new TempDirectory();
        string deep = new string('[', DocumentStoreOptions.MaxJsonDepth)
            + new string(']', DocumentStoreOptions.MaxJsonDepth);
        var documents = new Dictionary<(string Collection, string Id), string>
        {
            [("c", "pretty")] = "{\r\n  \"a\" : 1,\n  \"b\": [1, 2]\n}",
            [("c", "text")] = "{\"t\":\"é日本 <a href='x'>&+\"}",
            [("c", "escapes")] = "{\"e\":\"\\u00e9\\n\\\"q\\\" \\/\",\"s\":\"\\ud83d\\uDE00\"}",
            [("c", "number")] = "{\"n\":1.0E+2, \"m\":-0.000}",
            [("c", "deep")] = deep,
            [("c", "string")] = "\"just a string\"",
            [("c", "array")] = "[null, true]",
            [("c+", "ü/<x>&")] = "42",
            // Ids and text with a line separator, a next line, a byte order mark, a private-use character and one
            // past a surrogate pair in UTF-16 order, raw in the document (JSON escapes none of them).
            [("c", "\u2028\uFEFF\U0001F600\uE000\uFFFF")] = "{\"s\":\"\u2028\u0085\u00a0\uFEFF\uFF21\"}",
            [("c", "\uE000")] = "{\"s\":\"\U0001F600\"}",
        };
        string source = Path.Combine(dir.Path, "source");
        DocumentStoreOptions options = TestStoreOptions.SmallSegments();
        options.JsonSerializerOptions = new System.Text.Json.JsonSerializerOptions
        {
            MaxDepth = DocumentStoreOptions.MaxJsonDepth, // the deep document: a store written raw only
        };
        await using (DocumentStore store = DocumentStore.Open(source, options))
        {
            foreach (((string collection, string id), string json) in documents)
            {
                await store.PutAsync(collection, id, Encoding.UTF8.GetBytes(json));
            }
        }

        (int exit, string exported, string error) = await FolioToolProcess.RunAsync("export", source);
        Assert.True(exit == 0, error);
        Assert.Equal(documents.Count, exported.Split('\n', StringSplitOptions.RemoveEmptyEntries).Length);
        string file = Path.Combine(dir.Path, "export.ndjson");
        await File.WriteAllTextAsync(file, exported);
        string target = Path.Combine(dir.Path, "imported");
        (exit, _, error) = await FolioToolProcess.RunAsync("import", target, file);
        Assert.True(exit == 0, error);

        await using (DocumentStore imported = DocumentStore.Open(target, TestStoreOptions.SmallSegments()))
        {
            foreach (((string collection, string id), string json) in documents)
            {
                // A line break can only be white space between tokens (JSON strings escape theirs): it becomes a
                // space, so that every document stays on its line.
                string expected = json.Replace('\r', ' ').Replace('\n', ' ');
                Assert.Equal(expected, Encoding.UTF8.GetString(imported.Get(collection, id)!.Value.Json.Span));
            }
        }

        // A file that starts with a byte order mark (as some editors and shells write UTF-8) imports.
        string marked = Path.Combine(dir.Path, "marked.ndjson");
        await File.WriteAllBytesAsync(marked, [0xEF, 0xBB, 0xBF, .. Encoding.UTF8.GetBytes(exported)]);
        (exit, _, error) = await FolioToolProcess.RunAsync("import", Path.Combine(dir.Path, "marked"), marked);
        Assert.True(exit == 0, error);

        // Bytes that are not UTF-8 stop the import at their line, rather than being replaced.
        string bad = Path.Combine(dir.Path, "bad.ndjson");
        await File.WriteAllBytesAsync(bad, [
            .. "{\"collection\":\"c\",\"id\":\"ok\",\"document\":{}}\n"u8,
            .. "{\"collection\":\"c\",\"id\":\"bad\",\"document\":\""u8, 0xFF, .. "\"}\n"u8]);
        (exit, _, error) = await FolioToolProcess.RunAsync("import", target, bad);
        Assert.Equal(1, exit);
        Assert.Equal("folio: line 2 is not valid UTF-8; nothing was imported",
            error.Trim());
        (exit, _, error) = await FolioToolProcess.RunWithInputAsync(
            "{\"collection\":\"c\",\"id\":\"x\",\"id\":\"y\",\"document\":{}}\n", "import", target, "-");
        Assert.Equal(1, exit);
        Assert.Equal(
            "folio: line 1: \"id\" appears twice; nothing was imported",
            error.Trim());
    }

    [Fact]
    public async Task Tail_writes_the_change_feed_from_a_sequence_to_the_last_commit()
    {
        using var dir = new TempDirectory();
        string store = Path.Combine(dir.Path, "store");
        await using (DocumentStore opened = DocumentStore.Open(store, TestStoreOptions.SmallSegments()))
        {
            await opened.PutAsync("people", "a", "{\"v\":1}"u8.ToArray());
            await opened.PutAsync("people", "b", "{\"v\":2}"u8.ToArray());
            await opened.DeleteAsync("people", "a");
        }

        (int exit, string output, string error) = await FolioToolProcess.RunAsync("tail", store, "--from", "2");
        Assert.True(exit == 0, error);
        string[] lines = output.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        Assert.Equal(2, lines.Length);
        using JsonDocument put = JsonDocument.Parse(lines[0]);
        Assert.Equal(2, put.RootElement.GetProperty("sequence").GetInt64());
        Assert.Equal("put", put.RootElement.GetProperty("kind").GetString());
        Assert.Equal(2, put.RootElement.GetProperty("document").GetProperty("v").GetInt32());
        using JsonDocument delete = JsonDocument.Parse(lines[1]);
        Assert.Equal("delete", delete.RootElement.GetProperty("kind").GetString());
        Assert.False(delete.RootElement.TryGetProperty("document", out _));
    }

    [Fact]
    public async Task Tail_follows_commits_of_a_store_another_process_has_open()
    {
        using var dir = new TempDirectory();
        string store = Path.Combine(dir.Path, "store");
        await using DocumentStore opened = DocumentStore.Open(store, TestStoreOptions.SmallSegments());
        await opened.PutAsync("people", "before", "{\"v\":0}"u8.ToArray());

        using System.Diagnostics.Process tail = FolioToolProcess.Start("tail", store, "--follow");
        try
        {
            using var deadline = new CancellationTokenSource(TimeSpan.FromMinutes(2));
            string? first = await tail.StandardOutput.ReadLineAsync(deadline.Token);
            Assert.NotNull(first);
            using (JsonDocument line = JsonDocument.Parse(first))
            {
                Assert.Equal("before", line.RootElement.GetProperty("id").GetString());
            }

            // Commits made after tail started reach it while the store stays open here.
            for (int i = 1; i <= 3; i++)
            {
                await opened.PutAsync("people", $"after{i}", System.Text.Encoding.UTF8.GetBytes($"{{\"v\":{i}}}"));
            }

            await opened.DeleteAsync("people", "before");
            for (int i = 1; i <= 4; i++)
            {
                string? next = await tail.StandardOutput.ReadLineAsync(deadline.Token);
                Assert.NotNull(next);
                using JsonDocument line = JsonDocument.Parse(next);
                Assert.Equal(i + 1, line.RootElement.GetProperty("sequence").GetInt64());
                Assert.Equal(i <= 3 ? $"after{i}" : "before", line.RootElement.GetProperty("id").GetString());
                Assert.Equal(i <= 3 ? "put" : "delete", line.RootElement.GetProperty("kind").GetString());
            }
        }
        finally
        {
            tail.Kill(entireProcessTree: true);
            await tail.WaitForExitAsync();
        }
    }

    [Fact]
    public async Task Export_and_an_idle_following_tail_stop_with_one_line_when_the_reader_of_their_output_goes_away()
    {
        using var dir = new TempDirectory();
        string store = Path.Combine(dir.Path, "store");
        await using (DocumentStore created = DocumentStore.Open(store, TestStoreOptions.SmallSegments()))
        {
            var batch = new CommitBatch();
            for (int i = 0; i < 5000; i++)
            {
                // About 600 KB of NDJSON: more than the pipe and the tool's buffer hold together.
                string json = $"{{\"n\":{i},\"pad\":\"{new string('x', 40)}\"}}";
                batch.Put("people", $"p{i:D5}", Encoding.UTF8.GetBytes(json));
            }

            await created.WriteAsync(batch);
        }

        using (System.Diagnostics.Process export = FolioToolProcess.Start("export", store))
        {
            Task<string> error = export.StandardError.ReadToEndAsync();
            Assert.NotNull(await export.StandardOutput.ReadLineAsync());
            export.StandardOutput.Close(); // the reader goes away, as `folio export <store> | head -1`'s does
            await export.WaitForExitAsync().WaitAsync(TimeSpan.FromMinutes(2));
            Assert.Equal(1, export.ExitCode);
            Assert.Contains("folio: standard output was closed by its reader", await error, StringComparison.Ordinal);
        }

        await using DocumentStore opened = DocumentStore.Open(store, TestStoreOptions.SmallSegments());
        using System.Diagnostics.Process tail = FolioToolProcess.Start("tail", store, "--follow");
        try
        {
            Task<string> error = tail.StandardError.ReadToEndAsync();
            Assert.NotNull(await tail.StandardOutput.ReadLineAsync());
            tail.StandardOutput.Close();

            // No commit arrives, so the follower has nothing to write: it notices the closed pipe by itself.
            await tail.WaitForExitAsync().WaitAsync(TimeSpan.FromMinutes(2));
            Assert.Equal(1, tail.ExitCode);
            Assert.Contains("folio: standard output was closed by its reader", await error, StringComparison.Ordinal);
        }
        finally
        {
            if (!tail.HasExited)
            {
                tail.Kill(entireProcessTree: true);
            }

            await tail.WaitForExitAsync();
        }
    }

    [Fact]
    public async Task A_store_open_in_another_process_a_missing_store_and_a_damaged_store_fail_with_one_line()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 600, orders: 0);
        await using (DocumentStore.Open(store, TestStoreOptions.SmallSegments()))
        {
            (int exit, string _, string error) = await FolioToolProcess.RunAsync("import", store, "-");
            Assert.Equal(1, exit);
            Assert.Contains("is open in another process", error, StringComparison.Ordinal);
            Assert.Single(error.Trim().Split('\n'));
        }

        (int missing, string _, string missingError) =
            await FolioToolProcess.RunAsync("info", Path.Combine(dir.Path, "nothing"));
        Assert.Equal(1, missing);
        Assert.StartsWith("folio: no Folio store at", missingError, StringComparison.Ordinal);
        Assert.False(Directory.Exists(Path.Combine(dir.Path, "nothing")), "info created no store");

        // A flipped byte inside the checkpoint's first page.
        FileDamage.FlipByte(Path.Combine(store, "data.folio"), 8192 + 64 + 40, 0x01);

        (int damaged, string output, string damagedError) = await FolioToolProcess.RunAsync("verify", store);
        Assert.Equal(2, damaged);
        Assert.Contains("problem: Store corrupted in", output, StringComparison.Ordinal);
        Assert.Matches(@"(?m)^folio: the store has (1 damaged part|([2-9]|[1-9]\d+) damaged parts)\r?$", damagedError);
    }

    [Fact]
    public async Task Export_skipping_damage_salvages_the_readable_documents_and_names_what_it_skipped()
    {
        using var dir = new TempDirectory();
        string store = await CreateStoreAsync(dir.Path, "store", people: 3000, orders: 0);
        string data = Path.Combine(store, "data.folio");
        FileDamage.FlipByte(data, new FileInfo(data).Length / 2, 0x10); // in a leaf of people

        (int plain, string _, string plainError) = await FolioToolProcess.RunAsync("export", store);
        Assert.Equal(1, plain);
        Assert.Contains("Store corrupted in", plainError, StringComparison.Ordinal);

        (int exit, string exported, string error) = await FolioToolProcess.RunAsync("export", store, "--skip-damaged");
        Assert.Equal(2, exit);
        Assert.Contains("folio: skipped documents from 'p", error, StringComparison.Ordinal);
        Assert.Contains("of collection 'people': Store corrupted in", error, StringComparison.Ordinal);
        string[] lines = exported.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        Assert.InRange(lines.Length, 2000, 2999);
        Assert.Contains($"folio: exported {lines.Length} documents; skipped 1 damaged ranges", error,
            StringComparison.Ordinal);

        // The readable documents go into a new store.
        string file = Path.Combine(dir.Path, "salvaged.ndjson");
        await File.WriteAllTextAsync(file, exported);
        string target = Path.Combine(dir.Path, "salvaged");
        (exit, string output, error) = await FolioToolProcess.RunAsync("import", target, file);
        Assert.True(exit == 0, error);
        Assert.Contains($"imported {lines.Length} documents", output, StringComparison.Ordinal);
        (exit, string again, error) = await FolioToolProcess.RunAsync("export", target);
        Assert.True(exit == 0, error);
        Assert.Equal(Documents(exported), Documents(again));
    }

    [Fact]
    public async Task Export_skipping_damage_reads_past_a_damaged_journal_record_and_names_the_commits_it_took()
    {
        using var dir = new TempDirectory();
        string store = Path.Combine(dir.Path, "store");
        // Every commit stays in the journal only.
        await using (DocumentStore writer = DocumentStore.Open(store,
            TestStoreOptions.KeepingJournal(TestStoreOptions.TinySegments())))
        {
            for (int i = 0; i < 600; i++)
            {
                await writer.PutAsync("people", $"p{i:D4}",
                    Encoding.UTF8.GetBytes($"{{\"n\":{i},\"pad\":\"{new string('x', 200)}\"}}"));
            }
        }

        // A flipped byte in the middle record of the second segment, a sealed one.
        string segment = Directory.GetFiles(Path.Combine(store, "journal"), "*.journal")
            .Order(StringComparer.Ordinal).ElementAt(1);
        List<(long Offset, JournalFormat.RecordHeader Header)> records = JournalTestExtensions.SegmentRecords(segment);
        (long offset, JournalFormat.RecordHeader damaged) = records[records.Count / 2];
        FileDamage.FlipByte(segment, offset + damaged.Length - 2, 0x20);
        long last = damaged.FirstSequence + damaged.EntryCount - 1;

        (int plain, string _, string plainError) = await FolioToolProcess.RunAsync("export", store);
        Assert.Equal(1, plain);
        Assert.Contains("Store corrupted in", plainError, StringComparison.Ordinal);

        (int exit, string exported, string error) = await FolioToolProcess.RunAsync("export", store, "--skip-damaged");
        Assert.Equal(2, exit);
        Assert.Contains($"folio: skipped commits {damaged.FirstSequence} to {last} (the documents they wrote may be",
            error, StringComparison.Ordinal);
        Assert.Contains(Path.GetFileName(segment), error, StringComparison.Ordinal);
        string[] lines = exported.Split('\n', StringSplitOptions.RemoveEmptyEntries);
        Assert.Equal(600 - damaged.EntryCount, lines.Length); // one new document a commit
        Assert.Contains($"folio: exported {lines.Length} documents; skipped 1 damaged ranges", error,
            StringComparison.Ordinal);
    }

    /// <summary>Puts 3,000 documents of about 150 bytes (the same ids each round), then checkpoints.</summary>
    private static async Task RewriteAsync(DocumentStore store, int round)
    {
        for (int i = 0; i < 3000; i++)
        {
            await store.PutAsync("people", $"p{i:D5}",
                Encoding.UTF8.GetBytes($"{{\"round\":{round},\"n\":{i},\"pad\":\"{new string('x', 100)}\"}}"));
        }

        await store.CheckpointAsync();
    }

    private static async Task<string> CreateStoreAsync(string root, string name, int people, int orders)
    {
        string folder = Path.Combine(root, name);
        await using DocumentStore store = DocumentStore.Open(folder, TestStoreOptions.SmallSegments());
        for (int i = 0; i < people; i++)
        {
            await store.PutAsync("people", $"p{i:D4}", Encoding.UTF8.GetBytes($"{{\"name\":\"P{i}\",\"n\":{i}}}"));
        }

        await store.CheckpointAsync();
        for (int i = 0; i < orders; i++)
        {
            await store.PutAsync("orders", $"o{i:D4}", Encoding.UTF8.GetBytes($"{{\"total\":{i * 3}}}"));
        }

        return folder; // closed at return: the tool needs the store's lock
    }

    /// <summary>The collection, id and document of each exported line (versions and times differ after an
    /// import).</summary>
    private static List<string> Documents(string ndjson)
    {
        var documents = new List<string>();
        foreach (string line in ndjson.Split('\n', StringSplitOptions.RemoveEmptyEntries))
        {
            using JsonDocument parsed = JsonDocument.Parse(line);
            documents.Add(parsed.RootElement.GetProperty("collection").GetString() + "/"
                + parsed.RootElement.GetProperty("id").GetString() + "="
                + parsed.RootElement.GetProperty("document").GetRawText());
        }

        return documents;
    }
}
