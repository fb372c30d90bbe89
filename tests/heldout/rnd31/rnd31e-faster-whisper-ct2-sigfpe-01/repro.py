model = WhisperModel('/home/whisper-large-v2-ct2/', device="cuda", compute_type="float16", cpu_threads=4, num_workers=2)
segments, _ = model.transcribe(audio=audiof, word_timestamps=True)
