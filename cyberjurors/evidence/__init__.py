"""Evidence: intake's checks of what platforms send, photos and videos read within their caps
(media.py, frame_events.py), the media store that keeps inline evidence, the signature a human panel's outcome
carries (signing.py, below the console that signs and the workers that check), and the safety
screen for text addressed to the jury."""
