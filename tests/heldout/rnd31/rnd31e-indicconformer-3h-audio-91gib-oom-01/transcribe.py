import torch
import nemo.collections.asr as nemo_asr

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
nm_model = nemo_asr.models.EncDecCTCModel.from_pretrained('ai4bharat/indicconformer_stt_hi_hybrid_rnnt_large')
nm_model.freeze() # inference mode
nm_model = nm_model.to(device)
nm_model.cur_decoder = 'rnnt'
text = nm_model.transcribe(audio=str(processed_audio_file), batch_size=1, language_id='hi')[0]
